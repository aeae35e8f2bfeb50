# A message copied, moved or appended into Junk: report it as spam. spamsift-feedback only
# spools it and returns (the report is sent in the background).
require ["vnd.dovecot.pipe", "copy", "imapsieve", "environment", "variables"];

if environment :matches "imap.user" "*" {
  set "username" "${1}";
}

pipe :copy "spamsift-feedback" ["spam", "${username}"];
