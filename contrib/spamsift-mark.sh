#!/bin/sh
# spamsift-mark: a mail filter. Reads one message on standard input and prints it with
#   X-Spamsift-Verdict: spam|ham|unsure   X-Spamsift-Probability: 0.987654
# first in its header block, as the spamsift server classified it (POST /classify with
# curl, no Python started per message). Used by the Postfix filter (spamsift-filter.sh),
# procmail (`:0fw`) and maildrop (`xfilter`).
#
# Fails open: whatever goes wrong (server down or slow, key refused, message too large), the
# message is printed unchanged but for `X-Spamsift-Verdict: unscanned` and
# `X-Spamsift-Error: <why>`, the reason is logged to syslog (tag spamsift), and the exit
# status is still 0, so no caller defers or loses mail because of spamsift. Any X-Spamsift-*
# field the message arrived with is removed: a sender cannot forge a verdict.
#
# Settings: /etc/spamsift/mail.env (SPAMSIFT_URL, SPAMSIFT_MODEL, SPAMSIFT_FILTER_KEY_FILE,
# SPAMSIFT_TIMEOUT), nothing from the caller's environment, since Postfix, procmail and
# maildrop each give another one.
# Install: install -m 755 spamsift-mark.sh /usr/local/lib/spamsift/spamsift-mark

PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
SPAMSIFT_MAIL_ENV=/etc/spamsift/mail.env

SPAMSIFT_URL=http://127.0.0.1:8000
SPAMSIFT_MODEL=default
SPAMSIFT_FILTER_KEY_FILE=/etc/spamsift/filter.key
SPAMSIFT_TIMEOUT=10
error=""
if [ -r "$SPAMSIFT_MAIL_ENV" ]; then
    . "$SPAMSIFT_MAIL_ENV"
else
    error="cannot read $SPAMSIFT_MAIL_ENV"
fi

umask 077
work=$(mktemp -d "${TMPDIR:-/tmp}/spamsift-mark.XXXXXX") || {
    logger -t spamsift -p mail.err "spamsift-mark: cannot create a temporary folder: mail passed on unmarked"
    exec cat
}
trap 'rm -rf "$work"' EXIT
trap 'exit 75' HUP INT TERM

# The message as it came, then cut in two: an mbox `From ` line (procmail hands one over) and
# the message without it and without any X-Spamsift-* field (what is classified and printed).
cat > "$work/in" || exit 75
awk -v envelope="$work/envelope" '
    NR == 1 && /^From / { print > envelope; next }
    body { print; next }
    /^\r?$/ || !/^([ \t]|[!-9;-~]+:)/ { body = 1; print; next }
    /^[ \t]/ { if (!own) print; next }
    { own = (tolower(substr($0, 1, 11)) == "x-spamsift-"); if (!own) print }
' "$work/in" > "$work/message" || { cat "$work/in"; exit 0; }

verdict=unscanned
probability=""
if [ -z "$error" ]; then
    : > "$work/curlrc"
    if [ -n "$SPAMSIFT_FILTER_KEY_FILE" ] && [ -e "$SPAMSIFT_FILTER_KEY_FILE" ]; then
        if key=$(cat "$SPAMSIFT_FILTER_KEY_FILE" 2>/dev/null); then
            # In curl's own config file, not its arguments: a key in argv shows in `ps`.
            printf 'header = "Authorization: Bearer %s"\n' "$key" > "$work/curlrc"
        else
            error="cannot read the key file $SPAMSIFT_FILTER_KEY_FILE as $(id -un)"
        fi
    fi
fi
if [ -z "$error" ]; then
    status=$(curl --silent --show-error --config "$work/curlrc" \
        --max-time "$SPAMSIFT_TIMEOUT" --connect-timeout "$SPAMSIFT_TIMEOUT" \
        --header 'Content-Type: message/rfc822' --data-binary @"$work/message" \
        --output "$work/answer" --write-out '%{http_code}' \
        "$SPAMSIFT_URL/classify?model=$SPAMSIFT_MODEL" 2> "$work/curl-error")
    if [ "$status" = 200 ]; then
        # The answer is one line of JSON; its "verdict" is a class name, "spam_probability"
        # a number (or null for a model without a spam class).
        verdict=$(sed -n 's/.*"verdict": *"\([A-Za-z0-9_.-]*\)".*/\1/p' "$work/answer")
        probability=$(sed -n 's/.*"spam_probability": *\([-0-9.eE+]*\)[,}].*/\1/p' "$work/answer")
        [ -n "$verdict" ] || { verdict=unscanned; error="no verdict in the answer"; }
    elif [ "$status" = 000 ]; then
        error="$(head -c 300 "$work/curl-error") ($SPAMSIFT_URL)"
    else
        error="HTTP $status: $(sed -n 's/.*"message": *"\([^"]*\)".*/\1/p' "$work/answer" | head -c 300)"
    fi
fi
if [ -n "$error" ]; then
    error=$(printf '%s' "$error" | tr -c '[:print:]' ' ')
    logger -t spamsift -p mail.warning "spamsift-mark: message passed on unscanned: $error"
fi

# The marked message: envelope line, our fields (in the message's own line ending), the rest.
[ -s "$work/envelope" ] && cat "$work/envelope"
eol=$(head -n 1 "$work/message" | od -An -c | grep -q '\\r' && printf '\r')
printf 'X-Spamsift-Verdict: %s%s\n' "$verdict" "$eol"
if [ -n "$probability" ]; then
    LC_ALL=C awk -v p="$probability" -v eol="$eol" 'BEGIN { printf "X-Spamsift-Probability: %.6f%s\n", p, eol }'
fi
[ -n "$error" ] && printf 'X-Spamsift-Error: %s%s\n' "$error" "$eol"
cat "$work/message"
exit 0
