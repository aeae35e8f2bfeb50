// Reading uploaded mail: one .eml file is one message; an mbox (a file starting with
// "From ") is split at its "From " lines, with mboxrd's ">From " quoting undone.

const MBOX_SEPARATOR = /^From /;

export function isMbox(text) {
  return MBOX_SEPARATOR.test(text);
}

/** Split an mbox text into messages, each without its "From " separator line. */
export function splitMbox(text) {
  const messages = [];
  let current = null;
  let previousBlank = true;
  for (const line of text.split(/\r?\n/)) {
    if (MBOX_SEPARATOR.test(line) && previousBlank) {
      if (current !== null) messages.push(current);
      current = [];
    } else if (current !== null) {
      current.push(/^>+From /.test(line) ? line.slice(1) : line);
    }
    previousBlank = line === "";
  }
  if (current !== null) messages.push(current);
  return messages
    .map((lines) => {
      while (lines.length && lines[lines.length - 1] === "") lines.pop();
      return lines.join("\n") + "\n";
    })
    .filter((message) => message.trim() !== "");
}

/** Turn uploaded files into [{origin, raw}], an mbox giving one item per message. */
export async function readMessages(files) {
  const items = [];
  for (const file of files) {
    const text = await file.text();
    if (isMbox(text)) {
      splitMbox(text).forEach((raw, index) => items.push({ origin: `${file.name}#${index + 1}`, raw }));
    } else {
      items.push({ origin: file.name, raw: text });
    }
  }
  return items;
}

/** Group items into batches of at most `maxItems` and about `maxChars` characters. */
export function batches(items, { maxItems = 100, maxChars = 4_000_000 } = {}) {
  const groups = [];
  let group = [];
  let chars = 0;
  for (const item of items) {
    if (group.length && (group.length >= maxItems || chars + item.raw.length > maxChars)) {
      groups.push(group);
      group = [];
      chars = 0;
    }
    group.push(item);
    chars += item.raw.length;
  }
  if (group.length) groups.push(group);
  return groups;
}
