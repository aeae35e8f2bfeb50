# A message copied or moved out of Junk: report it as ham, unless it went to a trash folder,
# recognised by its SPECIAL-USE flag \Trash (whatever its name: "Trash", "Deleted Items",
# "Deleted Messages"), as the user's IMAP client knows it.
require ["vnd.dovecot.pipe", "copy", "imapsieve", "environment", "variables", "special-use"];

if environment :matches "imap.mailbox" "*" {
  set "mailbox" "${1}";
}

if specialuse_exists "${mailbox}" "\\Trash" {
  stop;
}

if environment :matches "imap.user" "*" {
  set "username" "${1}";
}

pipe :copy "spamsift-feedback" ["ham", "${username}"];
