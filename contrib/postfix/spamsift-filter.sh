#!/bin/sh
# spamsift as a Postfix after-queue content filter: Postfix's pipe(8) hands each message in,
#   spamsift-filter SENDER RECIPIENT...
# the message is marked by spamsift-mark (X-Spamsift-Verdict, X-Spamsift-Probability; see
# that script) and handed back to Postfix by SMTP on the re-injection listener of
# contrib/postfix/master.cf (127.0.0.1:10026), with curl: no Python and no sendmail/postdrop
# started per message.
#
# Fails open: spamsift down, slow or refusing passes the message on marked
# `X-Spamsift-Verdict: unscanned` (logged to syslog, tag spamsift). Only a failed re-injection
# exits 75 (EX_TEMPFAIL): Postfix keeps the message and retries.
#
# Settings: /etc/spamsift/mail.env (SPAMSIFT_REINJECT_URL, default smtp://127.0.0.1:10026,
# SPAMSIFT_TIMEOUT; the rest is spamsift-mark's), nothing from the environment.
# Install: see docs/mail-servers.md (install -m 755 spamsift-filter.sh
# /usr/local/lib/spamsift/spamsift-filter; spamsift-mark beside it).

PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
SPAMSIFT_MAIL_ENV=/etc/spamsift/mail.env
MARK=/usr/local/lib/spamsift/spamsift-mark
EX_USAGE=64
EX_TEMPFAIL=75

SPAMSIFT_REINJECT_URL=smtp://127.0.0.1:10026
SPAMSIFT_TIMEOUT=10
# shellcheck disable=SC1090
[ -r "$SPAMSIFT_MAIL_ENV" ] && . "$SPAMSIFT_MAIL_ENV"

if [ $# -lt 2 ]; then
    echo "usage: $0 SENDER RECIPIENT..." >&2
    exit $EX_USAGE
fi
sender="$1"
shift

umask 077
marked=$(mktemp "${TMPDIR:-/tmp}/spamsift-filter.XXXXXX") || exit $EX_TEMPFAIL
trap 'rm -f "$marked" "$marked.error"' EXIT
trap 'exit $EX_TEMPFAIL' HUP INT TERM

# spamsift-mark exits 0 whatever spamsift does; anything else (missing, disk full) defers.
if ! "$MARK" > "$marked"; then
    logger -t spamsift -p mail.err "spamsift-filter: $MARK failed, Postfix will retry"
    exit $EX_TEMPFAIL
fi

# Arguments for curl: --mail-rcpt before each recipient (the null sender is MAIL FROM:<>).
count=$#
while [ "$count" -gt 0 ]; do
    set -- "$@" --mail-rcpt "$1"
    shift
    count=$((count - 1))
done
curl --silent --show-error --max-time $((SPAMSIFT_TIMEOUT * 6)) --url "$SPAMSIFT_REINJECT_URL" \
    --mail-from "$sender" "$@" --upload-file "$marked" 2> "$marked.error"
status=$?
if [ $status -ne 0 ]; then
    logger -t spamsift -p mail.err \
        "spamsift-filter: re-injection to $SPAMSIFT_REINJECT_URL failed, Postfix will retry: $(tr -c '[:print:]' ' ' < "$marked.error")"
    exit $EX_TEMPFAIL
fi
exit 0
