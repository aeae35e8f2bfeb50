#!/bin/sh
# spamsift as a Postfix after-queue content filter (the "simple" pipe filter of FILTER_README):
# Postfix pipes each message in, this script adds X-Spamsift-Verdict and X-Spamsift-Probability
# (spamsift classify --add-header) and re-injects it with sendmail.
#
# Install:
#   install -m 755 spamsift-filter.sh /usr/local/bin/spamsift-filter.sh
#   useradd --system --no-create-home spamsift        # the filter never runs as root
#   echo 'ss_...' > /etc/spamsift/api-key              # a key with the classify scope, if any
#   chown root:spamsift /etc/spamsift/api-key && chmod 640 /etc/spamsift/api-key
# master.cf:
#   smtp      inet  n  -  y  -  -  smtpd
#     -o content_filter=spamsift:dummy
#   spamsift  unix  -  n  n  -  10  pipe
#     flags=Rq user=spamsift null_sender=
#     argv=/usr/local/bin/spamsift-filter.sh -f ${sender} -- ${recipient}
# then `postfix reload`. Filter rules downstream (Sieve, procmail) test X-Spamsift-Verdict.
#
# Fail open: when spamsift cannot answer, the message goes on unmarked (spamsift prints it
# unchanged and exits 3). Only a failed re-injection defers the mail (75, EX_TEMPFAIL).

SPAMSIFT_URL="${SPAMSIFT_URL:-http://127.0.0.1:8000}"
SPAMSIFT_KEY_FILE="${SPAMSIFT_KEY_FILE:-/etc/spamsift/api-key}"
SENDMAIL="${SENDMAIL:-/usr/sbin/sendmail -G -i}"
EX_TEMPFAIL=75

if [ -z "${SPAMSIFT_API_KEY:-}" ] && [ -r "$SPAMSIFT_KEY_FILE" ]; then
    SPAMSIFT_API_KEY=$(cat "$SPAMSIFT_KEY_FILE")
fi
export SPAMSIFT_API_KEY

umask 077
message=$(mktemp "${TMPDIR:-/tmp}/spamsift-in.XXXXXX") || exit $EX_TEMPFAIL
marked=$(mktemp "${TMPDIR:-/tmp}/spamsift-out.XXXXXX") || { rm -f "$message"; exit $EX_TEMPFAIL; }
trap 'rm -f "$message" "$marked"' EXIT
trap 'exit $EX_TEMPFAIL' HUP INT TERM

cat > "$message" || exit $EX_TEMPFAIL

spamsift classify --url "$SPAMSIFT_URL" --add-header --exit-zero < "$message" > "$marked" \
    || cp "$message" "$marked" || exit $EX_TEMPFAIL

# shellcheck disable=SC2086  # SENDMAIL is a command with its options
$SENDMAIL "$@" < "$marked" || exit $EX_TEMPFAIL
exit 0
