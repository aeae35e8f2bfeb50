// Building the page from DOM nodes. Text always goes in as text nodes (never innerHTML):
// tokens, key names and messages are chosen by strangers, a spam may carry <script> as a word.

const SVG_NS = "http://www.w3.org/2000/svg";

function append(parent, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

function apply(node, props) {
  for (const [name, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "on") {
      for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
    } else if (name === "class") {
      node.setAttribute("class", Array.isArray(value) ? value.filter(Boolean).join(" ") : value);
    } else if (name.startsWith("on") || name === "style") {
      throw new Error(`refusing to set ${name} as an attribute`);
    } else if (["value", "checked", "disabled", "selected", "hidden"].includes(name)) {
      node[name] = value;
    } else {
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }
}

/** An HTML element: h("p", {class: "note"}, "text", child, [more]). */
export function h(tag, props, ...children) {
  const node = document.createElement(tag);
  apply(node, props);
  append(node, children);
  return node;
}

/** An SVG element, drawn the same way. */
export function s(tag, props, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  apply(node, props);
  append(node, children);
  return node;
}

/** Replace the children of `node`. */
export function fill(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

let ids = 0;
/** A fresh id for label/aria pairs. */
export function uid(prefix) {
  ids += 1;
  return `${prefix}-${ids}`;
}

/** A labelled control: <div class="field"><label for=…>…</label> control <p error></div>. */
export function field(labelText, control, { hint, wide } = {}) {
  if (!control.id) control.id = uid("f");
  const error = h("p", { class: "field-error", id: `${control.id}-error`, hidden: true });
  const describedBy = [error.id];
  let hintNode = null;
  if (hint) {
    hintNode = h("p", { class: "hint", id: `${control.id}-hint` }, hint);
    describedBy.push(hintNode.id);
  }
  control.setAttribute("aria-describedby", describedBy.join(" "));
  const wrapper = h(
    "div",
    { class: ["field", wide && "wide"] },
    h("label", { for: control.id }, labelText),
    control,
    hintNode,
    error,
  );
  wrapper.showError = (message) => {
    error.textContent = message || "";
    error.hidden = !message;
    if (message) control.setAttribute("aria-invalid", "true");
    else control.removeAttribute("aria-invalid");
  };
  return wrapper;
}

const numberFormat = new Intl.NumberFormat("en");
export function number(n) {
  return n === null || n === undefined ? "–" : numberFormat.format(n);
}

export function percent(rate, digits = 1) {
  if (rate === null || rate === undefined) return "–";
  return `${(rate * 100).toFixed(digits)} %`;
}

export function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit ? 1 : 0)} ${units[unit]}`;
}

export function when(iso) {
  if (!iso) return "never";
  const date = new Date(iso);
  return `${date.toISOString().slice(0, 16).replace("T", " ")} UTC`;
}
