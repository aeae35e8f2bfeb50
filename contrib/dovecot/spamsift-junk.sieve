# Delivery (LMTP or dovecot-lda): file the mail spamsift marked as spam into Junk.
require ["fileinto", "mailbox"];

if header :is "X-Spamsift-Verdict" "spam" {
  fileinto :create "Junk";
  stop;
}
