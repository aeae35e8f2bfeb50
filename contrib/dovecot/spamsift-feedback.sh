#!/bin/sh
# "Report spam / not spam" for Dovecot: report-spam.sieve and report-ham.sieve pipe each
# message moved into or out of Junk to
#   spamsift-feedback spam|ham IMAP-USER       (the message on standard input)
# which only writes it to the spool and returns, so the IMAP command is not held up; a
# background run of `spamsift-feedback --drain` (started here, one at a time) then sends each
# spooled message to the spamsift server (POST /feedback with curl): relabelled if it was
# trained, trained otherwise. Messages the server cannot take now (down, overloaded, key
# refused) stay in the spool for the next report or `spamsift-feedback --drain` (e.g. from
# cron every few minutes); each failure is logged to syslog (tag spamsift).
#
# Settings: /etc/spamsift/mail.env (SPAMSIFT_URL, SPAMSIFT_MODEL, SPAMSIFT_MODEL_PER_USER,
# SPAMSIFT_REPORT_KEY_FILE, SPAMSIFT_TIMEOUT, SPAMSIFT_SPOOL), nothing from the environment:
# Pigeonhole gives its programs only USER, HOME and HOST. Runs as the mail user, which must
# be able to read the key file and write the spool (docs/mail-servers.md).

PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
SPAMSIFT_MAIL_ENV=/etc/spamsift/mail.env

SPAMSIFT_URL=http://127.0.0.1:8000
SPAMSIFT_MODEL=default
SPAMSIFT_MODEL_PER_USER=0
SPAMSIFT_REPORT_KEY_FILE=/etc/spamsift/report.key
SPAMSIFT_TIMEOUT=10
SPAMSIFT_SPOOL=/var/spool/spamsift
# shellcheck disable=SC1090
if [ -r "$SPAMSIFT_MAIL_ENV" ]; then
    . "$SPAMSIFT_MAIL_ENV"
else
    logger -t spamsift -p mail.err "spamsift-feedback: cannot read $SPAMSIFT_MAIL_ENV as $(id -un); using the defaults"
fi
umask 007
new="$SPAMSIFT_SPOOL/new"

log() {
    logger -t spamsift -p "mail.$1" "spamsift-feedback: $(printf '%s' "$2" | tr -c '[:print:]' ' ')"
}

# Send one spooled message (named NANOSECONDS.PID.LABEL.MODEL). 0: done with it (sent, or refused
# for good and logged); 1: keep it and stop for now (the server cannot take reports).
send() {
    file="$1"
    name=${file##*/}
    label=$(printf '%s' "$name" | cut -d. -f3)
    model=$(printf '%s' "$name" | cut -d. -f4-)
    : > "$work/curlrc"
    if [ -n "$SPAMSIFT_REPORT_KEY_FILE" ] && [ -e "$SPAMSIFT_REPORT_KEY_FILE" ]; then
        if ! key=$(cat "$SPAMSIFT_REPORT_KEY_FILE" 2>/dev/null); then
            log err "cannot read the key file $SPAMSIFT_REPORT_KEY_FILE as $(id -un); reports wait in $SPAMSIFT_SPOOL"
            return 1
        fi
        # In curl's config, not its arguments: a key in argv shows in `ps`.
        printf 'header = "Authorization: Bearer %s"\n' "$key" > "$work/curlrc"
    fi
    status=$(curl --silent --show-error --config "$work/curlrc" \
        --max-time "$SPAMSIFT_TIMEOUT" --connect-timeout "$SPAMSIFT_TIMEOUT" \
        --header 'Content-Type: message/rfc822' --data-binary @"$file" \
        --output "$work/answer" --write-out '%{http_code}' \
        "$SPAMSIFT_URL/feedback?model=$model&label=$label" 2> "$work/curl-error")
    id=$(sed -n '/^\r\{0,1\}$/q; s/^[Mm][Ee][Ss][Ss][Aa][Gg][Ee]-[Ii][Dd]: *//p' "$file" | head -n 1)
    case "$status" in
        200)
            return 0 ;;
        000)
            log err "cannot reach $SPAMSIFT_URL ($(head -c 300 "$work/curl-error")); reports wait in $SPAMSIFT_SPOOL"
            return 1 ;;
        401|403|408|429|5*)
            log err "HTTP $status from $SPAMSIFT_URL: $(head -c 300 "$work/answer"); reports wait in $SPAMSIFT_SPOOL"
            return 1 ;;
        *)
            log warning "report of $id as $label in $model refused, HTTP $status: $(head -c 300 "$work/answer")"
            return 0 ;;
    esac
}

# The lock is held: say so in .drain.pid until it is let go.
holding() {
    echo $$ > "$SPAMSIFT_SPOOL/.drain.pid"
    trap 'rm -rf "$work"; rm -f "$SPAMSIFT_SPOOL/.drain.pid"' EXIT
}

drain() {
    work=$(mktemp -d "${TMPDIR:-/tmp}/spamsift-feedback.XXXXXX") || exit 75
    trap 'rm -rf "$work"' EXIT
    exec 9> "$SPAMSIFT_SPOOL/.drain.lock" || exit 75
    # One drain at a time, named in .drain.pid while it holds the lock. A report spooled
    # while the drain finishes is seen by its look after removing the pid file, so none
    # waits for the next report.
    if [ "$1" = background ]; then
        flock -n 9 || exit 0
        holding
        # A second's pause, so that a move of many messages is spooled before sending
        # starts: the move's own work, not the reports, has the CPU while the user waits.
        sleep 1
    else
        # By hand or from cron: wait for a drain under way, then send what is left.
        flock -w 600 9 || exit 75
        holding
    fi
    while :; do
        for file in "$new"/*; do
            [ -e "$file" ] || break
            send "$file" || exit 0
            rm -f "$file"
        done
        rm -f "$SPAMSIFT_SPOOL/.drain.pid"
        trap 'rm -rf "$work"' EXIT
        flock -u 9
        set -- "$new"/*
        [ -e "$1" ] || exit 0
        flock -n 9 || exit 0
        holding
    done
}

case "${1:-}" in
    --drain) drain ;;
    --background-drain) drain background ;;
    spam|ham) label="$1" ;;
    *) echo "usage: $0 spam|ham [IMAP-USER] < message, or $0 --drain" >&2; exit 64 ;;
esac
user="${2:-}"
model="$SPAMSIFT_MODEL"
if [ "$SPAMSIFT_MODEL_PER_USER" = 1 ] && [ -n "$user" ]; then
    model=$(printf '%s' "$user" | tr 'A-Z@' 'a-z.' | tr -cd 'a-z0-9_.-')
fi

# Spool: written under tmp/, then renamed into new/, so a drain never sends half a message.
[ -d "$new" ] || mkdir -p "$SPAMSIFT_SPOOL/tmp" "$new" 2>/dev/null
name="$(date +%s%N).$$.$label.$model"  # sorts in the order of the reports
if ! cat > "$SPAMSIFT_SPOOL/tmp/$name" || ! mv "$SPAMSIFT_SPOOL/tmp/$name" "$new/$name"; then
    rm -f "$SPAMSIFT_SPOOL/tmp/$name"
    log err "cannot spool a report as $(id -un) in $SPAMSIFT_SPOOL: the $label report of user $user is lost"
    exit 0  # the user's move goes through all the same
fi
# Start a drain unless one runs (shell builtins only: a move of 200 messages runs this 200
# times), at a lower priority than Dovecot. Detached, with no descriptor of Dovecot's:
# Dovecot waits for this script only.
if ! { read -r pid < "$SPAMSIFT_SPOOL/.drain.pid" && kill -0 "$pid"; } 2>/dev/null; then
    setsid nice -n 10 "$0" --background-drain < /dev/null > /dev/null 2>&1 &
fi
exit 0
