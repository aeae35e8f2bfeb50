#!/bin/sh
# Called by report-spam.sieve / report-ham.sieve with the message on stdin:
#   spamsift-feedback.sh spam|ham IMAP-USER
# It tells a running spamsift server (SPAMSIFT_URL) that the message is spam or ham: relabelled
# if it was trained, trained otherwise. Models: SPAMSIFT_MODEL (default "default"), or with
# SPAMSIFT_MODEL_PER_USER=1 one per user, named after the IMAP user lower-cased with '@' as '.'
# (alice@example.org -> alice.example.org; create them with POST /v1/models).

label="$1"
user="$2"
SPAMSIFT_URL="${SPAMSIFT_URL:-http://127.0.0.1:8000}"
SPAMSIFT_KEY_FILE="${SPAMSIFT_KEY_FILE:-/etc/spamsift/api-key}"
model="${SPAMSIFT_MODEL:-default}"
if [ "${SPAMSIFT_MODEL_PER_USER:-0}" = 1 ] && [ -n "$user" ]; then
    model=$(printf '%s' "$user" | tr 'A-Z@' 'a-z.')
fi

if [ -z "${SPAMSIFT_API_KEY:-}" ] && [ -r "$SPAMSIFT_KEY_FILE" ]; then
    SPAMSIFT_API_KEY=$(cat "$SPAMSIFT_KEY_FILE")
fi
export SPAMSIFT_API_KEY

case "$label" in
    spam|ham) ;;
    *) echo "usage: $0 spam|ham [user]" >&2; exit 64 ;;
esac

exec spamsift feedback --url "$SPAMSIFT_URL" --model "$model" --label "$label" -
