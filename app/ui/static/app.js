// The spamsift dashboard: sign in with an API key, then the pages that key may see. Every
// figure comes from the public API; hash routes (#overview, #model/NAME …) keep it one page.

import { ApiError, del, get, modelPath, patch, post, session } from "./api.js";
import { barChart } from "./charts.js";
import { bytes, field, fill, h, number, percent, uid, when } from "./dom.js";
import { batches, readMessages } from "./mail.js";

const root = document.getElementById("view");
// Each page is built in a detached element (the `view` its renderer gets) and shown only if no
// later route replaced it, so a slow answer for a page left behind never covers the one asked for.
let routeCount = 0;
const nav = document.getElementById("nav");
const who = document.getElementById("who");
const banner = document.getElementById("banner");

const state = { identity: null, models: null, range: "7d" };

// --- who may see what --------------------------------------------------------------------

function key() {
  return state.identity && state.identity.key;
}

function can(scope) {
  if (!state.identity) return false;
  if (state.identity.development_mode) return true;
  const scopes = key().scopes;
  return scopes.includes(scope) || scopes.includes("admin");
}

function everyModel() {
  return state.identity.development_mode || key().models === null;
}

const PAGES = [
  { id: "overview", title: "Overview", allowed: () => can("admin") },
  { id: "model", title: "Model", allowed: () => can("admin") },
  { id: "scan", title: "Scan", allowed: () => can("classify") },
  { id: "learn", title: "Learn", allowed: () => can("train") },
  { id: "settings", title: "Settings", allowed: () => can("admin") },
  { id: "keys", title: "Keys", allowed: () => can("admin") && everyModel() },
];

/** The names of the models this key may use (a list model limited keys carry). */
async function modelNames() {
  if (state.models) return state.models;
  if (!everyModel()) {
    state.models = [...key().models];
  } else if (can("admin")) {
    state.models = (await get("v1/models")).models.map((model) => model.name);
  } else {
    state.models = ["default"];
  }
  return state.models;
}

// --- messages to the operator ------------------------------------------------------------

function say(message, kind = "info") {
  fill(banner, message ? h("p", { class: `notice ${kind}` }, message) : null);
}

function errorText(error) {
  if (error instanceof ApiError) return `${error.message} (${error.code})`;
  return String(error && error.message ? error.message : error);
}

window.addEventListener("spamsift:refused", (event) => {
  signOut(`Signed out: the server refused the key (${event.detail}). It may have been revoked.`);
});

// --- sign-in -----------------------------------------------------------------------------

function signOut(message) {
  session.key = null;
  state.identity = null;
  state.models = null;
  renderChrome();
  renderSignIn(message);
}

function renderSignIn(message) {
  const input = h("input", {
    type: "password",
    name: "key",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
  });
  const keyField = field("API key", input, {
    hint: "Made with spamsift keys create. It is kept in this tab only and sent as an Authorization header.",
  });
  const button = h("button", { type: "submit" }, "Sign in");
  const form = h(
    "form",
    {
      class: "card signin",
      "aria-labelledby": "signin-title",
      on: {
        submit: async (event) => {
          event.preventDefault();
          button.disabled = true;
          keyField.showError("");
          try {
            const identity = await get("v1/keys/me", { key: input.value.trim() });
            session.key = input.value.trim();
            await start(identity);
          } catch (error) {
            keyField.showError(
              error instanceof ApiError && error.status === 401
                ? "This key is unknown or revoked."
                : errorText(error),
            );
            input.focus();
          } finally {
            button.disabled = false;
          }
        },
      },
    },
    h("h1", { id: "signin-title" }, "Sign in"),
    keyField,
    button,
  );
  say(message || "", message ? "error" : "info");
  routeCount += 1; // a page still loading must not cover the sign-in form
  fill(root, form);
  input.focus();
}

async function start(identity) {
  state.identity = identity;
  state.models = null;
  say(
    identity.development_mode
      ? "Development mode: no API key exists, so this server is open to anyone who reaches it."
      : "",
    "warning",
  );
  renderChrome();
  if (!location.hash || !allowedPage(pageOf(location.hash))) {
    // Not `location.hash =`: its hashchange would render the page a second time.
    history.replaceState(null, "", firstPage());
  }
  await route();
}

function firstPage() {
  const page = PAGES.find((one) => one.allowed());
  return `#${page ? page.id : "scan"}`;
}

function pageOf(hash) {
  return hash.replace(/^#/, "").split("/")[0];
}

function allowedPage(id) {
  const page = PAGES.find((one) => one.id === id);
  return page && page.allowed();
}

function renderChrome() {
  const current = pageOf(location.hash);
  fill(
    nav,
    state.identity
      ? h(
          "ul",
          {},
          PAGES.filter((page) => page.allowed()).map((page) =>
            h(
              "li",
              {},
              h("a", { href: `#${page.id}`, "aria-current": page.id === current ? "page" : null }, page.title),
            ),
          ),
        )
      : null,
  );
  if (!state.identity) {
    fill(who);
    return;
  }
  const identity = key();
  fill(
    who,
    identity
      ? h("span", { class: "key-id" }, identity.name || identity.key_id, " · ", identity.scopes.join(", "))
      : h("span", { class: "key-id" }, "development mode"),
    identity ? h("button", { type: "button", class: "link", on: { click: () => signOut("Signed out.") } }, "Sign out") : null,
  );
}

// --- routing ---------------------------------------------------------------------------------

async function route() {
  if (!state.identity) return;
  const [id, ...rest] = location.hash.replace(/^#/, "").split("/");
  const argument = rest.length ? decodeURIComponent(rest.join("/")) : null;
  renderChrome();
  if (!allowedPage(id)) {
    location.hash = firstPage();
    return;
  }
  routeCount += 1;
  const mine = routeCount;
  const target = document.createElement("div");
  showLoading();
  try {
    await RENDERERS[id](argument, target);
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return; // signed out already
    fill(target, h("div", { class: "card" }, h("h1", {}, "Could not load this page"), h("p", { class: "error" }, errorText(error))));
  }
  if (mine !== routeCount || !state.identity) return;
  fill(root, [...target.childNodes]);
  root.removeAttribute("aria-busy");
  root.focus({ preventScroll: true });
}

/** Replace the page (the sign-in form included) by a loading notice until the next one is ready. */
function showLoading() {
  root.setAttribute("aria-busy", "true");
  fill(root, h("p", { class: "loading", role: "status" }, "Loading…"));
}

window.addEventListener("hashchange", route);

function modelPicker(current, pageId) {
  const select = h("select", { name: "model" });
  return (async () => {
    for (const name of await modelNames()) {
      select.append(h("option", { value: name, selected: name === current }, name));
    }
    select.addEventListener("change", () => {
      location.hash = `#${pageId}/${encodeURIComponent(select.value)}`;
    });
    return field("Model", select);
  })();
}

async function chosenModel(argument) {
  const names = await modelNames();
  if (argument && names.includes(argument)) return argument;
  return names.includes("default") ? "default" : names[0];
}

// --- overview ------------------------------------------------------------------------------

function trustBadge(stats) {
  // A model backed by another classifies with both models' counts (the blend's messages).
  const messages = stats.blend
    ? Object.entries(stats.blend.messages)
    : Object.entries(stats.classes).map(([label, counts]) => [label, counts.messages]);
  const untrained = messages.filter(([, n]) => n === 0);
  if (untrained.length) {
    return h("span", { class: "badge bad" }, `not trained: no ${untrained.map(([label]) => label).join(", ")} yet`);
  }
  if (stats.warnings && stats.warnings.length) return h("span", { class: "badge warn" }, "needs more training");
  return h("span", { class: "badge good" }, "trained");
}

function warningsList(stats) {
  if (!stats.warnings || !stats.warnings.length) return null;
  return h("ul", { class: "warnings" }, stats.warnings.map((warning) => h("li", {}, String(warning))));
}

async function renderOverview(_argument, view) {
  const names = await modelNames();
  const all = await Promise.all(names.map((name) => get(`${modelPath(name)}/stats`)));
  const totalTokens = all.reduce((sum, stats) => sum + stats.vocabulary.tokens, 0);
  const databaseBytes = all.length ? all[0].database_bytes : 0;
  const rows = all.map((stats) => {
    const day = stats.activity["24h"];
    const share = totalTokens ? stats.vocabulary.tokens / totalTokens : null;
    return h(
      "article",
      { class: "card model-card", "aria-labelledby": `model-${stats.model}` },
      h(
        "header",
        {},
        h("h2", { id: `model-${stats.model}` }, h("a", { href: `#model/${encodeURIComponent(stats.model)}` }, stats.model)),
        trustBadge(stats),
      ),
      warningsList(stats),
      h(
        "dl",
        { class: "figures" },
        Object.entries(stats.classes).map(([label, counts]) => [
          h("dt", {}, `${label} messages`),
          h("dd", { "data-figure": `messages-${label}` }, number(counts.messages)),
        ]),
        h("dt", {}, "Vocabulary"),
        h("dd", { "data-figure": "vocabulary" }, number(stats.vocabulary.tokens), h("small", {}, ` (${number(stats.vocabulary.effective)} used)`)),
        h("dt", {}, "Share of tokens"),
        h("dd", {}, percent(share)),
        h("dt", {}, "Last trained"),
        h("dd", {}, when(stats.last_trained_hour)),
        h("dt", {}, "Event model"),
        h("dd", {}, stats.event_model),
        h("dt", {}, "Classified, 24 h"),
        h("dd", { "data-figure": "classified-24h" }, number(day.classified)),
        h("dt", {}, "Corrections, 24 h"),
        h("dd", { "data-figure": "corrections-24h" }, number(day.corrections)),
      ),
    );
  });
  fill(
    view,
    h("h1", {}, "Overview"),
    h("p", { class: "lede" }, `${names.length} model${names.length === 1 ? "" : "s"} · database ${bytes(databaseBytes)}`),
    h("div", { class: "cards" }, rows),
  );
}

// --- one model over time -------------------------------------------------------------------

const RANGE_WORDS = { "24h": "in the last 24 hours", "7d": "in the last 7 days", "30d": "in the last 30 days" };

async function renderModel(argument, view) {
  const name = await chosenModel(argument);
  const [picker, stats, activity] = await Promise.all([
    modelPicker(name, "model"),
    get(`${modelPath(name)}/stats`),
    get(`${modelPath(name)}/activity?range=${state.range}`),
  ]);
  const over = h("div", { class: "activity" }, activitySections(activity));
  // The range switch reads the activity alone: the stats (token figures) stay as they are.
  const buttons = ["24h", "7d", "30d"].map((range) =>
    h(
      "button",
      {
        type: "button",
        "aria-pressed": range === state.range ? "true" : "false",
        on: {
          click: async () => {
            state.range = range;
            buttons.forEach((one) => one.setAttribute("aria-pressed", one.textContent === range ? "true" : "false"));
            over.setAttribute("aria-busy", "true");
            try {
              const chosen = await get(`${modelPath(name)}/activity?range=${range}`);
              if (state.range === range) fill(over, activitySections(chosen));
            } catch (error) {
              say(errorText(error), "error");
            } finally {
              over.removeAttribute("aria-busy");
            }
          },
        },
      },
      range,
    ),
  );
  const ranges = h("div", { class: "ranges", role: "group", "aria-label": "Time range" }, buttons);
  fill(
    view,
    h("div", { class: "page-head" }, h("h1", {}, `Model ${name}`), picker, ranges),
    relationNote(stats),
    warningsList(stats),
    over,
    topTokens(stats),
  );
}

/** The correction rates and the charts of one activity answer. */
function activitySections(activity) {
  const starts = activity.buckets.map((bucket) => bucket.start);
  const values = (pick) => activity.buckets.map(pick);
  const verdictLabels = Object.keys(activity.totals.verdicts);
  const verdictSeries = verdictLabels.map((label, i) => ({
    label,
    colour: colourOf(label, i),
    values: values((bucket) => bucket.verdicts[label] || 0),
  }));
  const hamSpam = "false_positives" in activity.totals;
  const correctionSeries = hamSpam
    ? [
        { label: "false positives (corrected to ham)", colour: "c-fp", values: values((b) => b.false_positives) },
        { label: "false negatives (corrected to spam)", colour: "c-fn", values: values((b) => b.false_negatives) },
      ]
    : Object.keys(activity.totals.corrected_to).map((label, i) => ({
        label: `corrected to ${label}`,
        colour: colourOf(label, i),
        values: values((b) => b.corrected_to[label]),
      }));
  const words = RANGE_WORDS[activity.range];
  const rates = [
    h("li", { "data-rate": "corrections" }, h("strong", {}, percent(activity.rates.corrections, 2)),
      ` of classified mail was corrected by users ${words} (${number(activity.totals.corrections)} of ${number(activity.totals.classified)}).`),
  ];
  if (hamSpam) {
    rates.push(
      h("li", { "data-rate": "false-positives" }, h("strong", {}, percent(activity.rates.false_positives, 2)),
        ` was corrected as a false positive (spam that was ham) ${words}.`),
      h("li", { "data-rate": "false-negatives" }, h("strong", {}, percent(activity.rates.false_negatives, 2)),
        ` was corrected as a false negative (spam let through) ${words}.`),
    );
  }
  return [
    h("section", { class: "card", "aria-label": "Correction rates" }, h("ul", { class: "rates" }, rates)),
    h(
      "div",
      { class: "charts" },
      barChart({ title: "Classified, by verdict", buckets: starts, unit: activity.bucket, series: verdictSeries }),
      barChart({
        title: "Training",
        buckets: starts,
        unit: activity.bucket,
        stacked: false,
        series: [
          { label: "trained", colour: "c-train", values: values((b) => b.trained) },
          { label: "forgotten", colour: "c-forget", values: values((b) => b.forgotten) },
          { label: "feedback", colour: "c-feedback", values: values((b) => b.feedback) },
        ],
      }),
      barChart({ title: "Corrections by users", buckets: starts, unit: activity.bucket, stacked: false, series: correctionSeries }),
    ),
  ];
}

// A personal model backed by another (classified on both models' counts), or a model backing others.
function relationNote(stats) {
  const link = (model) => h("a", { href: `#model/${encodeURIComponent(model)}` }, model);
  const parts = [];
  if (stats.backed_by) {
    const messages = Object.entries(stats.blend ? stats.blend.messages : {})
      .map(([label, n]) => `${number(n)} ${label}`)
      .join(", ");
    parts.push(
      h("li", { "data-relation": "backed-by" }, "Backed by ", link(stats.backed_by),
        `: classified on both models' counts (${messages})`,
        stats.feedback_trains_backing ? "; feedback trains both." : "; feedback trains this model alone."),
    );
  }
  if (stats.backs && stats.backs.length) {
    const links = [];
    stats.backs.forEach((model, i) => {
      if (i) links.push(", ");
      links.push(link(model));
    });
    parts.push(h("li", { "data-relation": "backs" }, "Backs ", ...links, "."));
  }
  return parts.length ? h("ul", { class: "relation" }, parts) : null;
}

/** A bar of `share` (0..1) of its track, in the class's colour (a <meter> is drawn green). */
function weightBar(share, colour) {
  const bar = h("span", { class: `bar ${colour}` });
  bar.style.width = `${(100 * share).toFixed(1)}%`; // CSSOM: allowed by the page's style-src
  return h("span", { class: "bar-track", "aria-hidden": "true" }, bar);
}

function colourOf(label, index) {
  if (label === "spam") return "c-spam";
  if (label === "ham") return "c-ham";
  if (label === "unsure") return "c-unsure";
  return `c-${index % 6}`;
}

function topTokens(stats) {
  const classes = Object.keys(stats.top_tokens);
  const body = classes.length
    ? h(
        "div",
        { class: "token-tables" },
        classes.map((label) => {
          const ranked = stats.top_tokens[label];
          const strongest = Math.max(1e-9, ...ranked.map((one) => Math.abs(one.weight)));
          const colour = colourOf(label, classes.indexOf(label));
          return h(
            "div",
            { class: "scroll" },
            h(
              "table",
              { class: "tokens", "data-class": label },
              h("caption", {}, `Strongest ${label} tokens`),
              h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Token"), h("th", { scope: "col" }, "Weight"))),
              h(
                "tbody",
                {},
                ranked.map((one) =>
                  h(
                    "tr",
                    {},
                    h("td", { class: "token" }, h("code", {}, one.token)),
                    h("td", { class: "weight" }, weightBar(Math.abs(one.weight) / strongest, colour), ` ${one.weight.toFixed(2)}`),
                  ),
                ),
              ),
            ),
          );
        }),
      )
    : h("p", {}, "No tokens yet: every class needs a trained message.");
  return h("section", { class: "card" }, h("h2", {}, "Top tokens"), body);
}

// --- scan ----------------------------------------------------------------------------------

async function renderScan(argument, view) {
  const name = await chosenModel(argument);
  const picker = await modelPicker(name, "scan");
  const text = h("textarea", { name: "message", rows: 10, spellcheck: "false" });
  const file = h("input", { type: "file", name: "file", accept: ".eml,.txt,message/rfc822,text/plain" });
  const plain = h("input", { type: "checkbox", name: "plain" });
  const result = h("div", { id: "scan-result", "aria-live": "polite" });
  const button = h("button", { type: "submit" }, "Scan");
  file.addEventListener("change", async () => {
    if (file.files.length) text.value = await file.files[0].text();
  });
  const textField = field("Message", text, {
    wide: true,
    hint: "Paste a whole mail with its headers (or plain text). It is sent once, to be scored, and never stored.",
  });
  const form = h(
    "form",
    {
      class: "card",
      on: {
        submit: async (event) => {
          event.preventDefault();
          textField.showError("");
          if (!text.value.trim()) {
            textField.showError("Paste a message or choose a file first.");
            return;
          }
          button.disabled = true;
          const body = plain.checked ? { text: text.value } : { raw: text.value };
          try {
            const answer = await post(`${modelPath(name)}/classify`, { ...body, explain: true });
            fill(result, classification(name, answer));
          } catch (error) {
            textField.showError(errorText(error));
          } finally {
            button.disabled = false;
          }
        },
      },
    },
    textField,
    field("…or a .eml file", file),
    h("div", { class: "check" }, plain, h("label", { for: (plain.id = uid("plain")) }, "Plain text, not a mail with headers")),
    button,
  );
  fill(view, h("div", { class: "page-head" }, h("h1", {}, "Scan a message"), picker), form, result);
}

function classification(name, answer) {
  const clues = answer.clues || [];
  const strongest = Math.max(1e-9, ...clues.map((clue) => Math.abs(clue.weight)));
  const probability =
    answer.spam_probability !== undefined && answer.spam_probability !== null
      ? h("p", {}, "Spam probability ", h("strong", { "data-figure": "spam-probability" }, answer.spam_probability.toFixed(4)))
      : null;
  return h(
    "section",
    { class: "card result", "aria-label": "Result" },
    h("h2", {}, "Verdict: ", h("span", { class: `badge verdict-${answer.verdict}`, "data-figure": "verdict" }, answer.verdict)),
    probability,
    h("p", { class: "hint" }, `${number(answer.tokens)} tokens used · ${answer.event_model} · message id `, h("code", {}, answer.message_id)),
    h(
      "div",
      { class: "scroll" },
      h(
        "table",
        { class: "clues" },
        h("caption", {}, "Clues: the tokens that moved the verdict most"),
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Token"), h("th", { scope: "col" }, "Towards"), h("th", { scope: "col" }, "Weight"))),
        h(
          "tbody",
          {},
          clues.map((clue) =>
            h(
              "tr",
              {},
              h("td", { class: "token" }, h("code", {}, clue.token)),
              h("td", {}, h("span", { class: `badge verdict-${clue.class}` }, clue.class)),
              h("td", { class: "weight" },
                weightBar(Math.abs(clue.weight) / strongest, colourOf(clue.class, Object.keys(answer.probabilities).indexOf(clue.class))),
                ` ${clue.weight.toFixed(3)}`),
            ),
          ),
        ),
      ),
    ),
    can("train") ? feedbackButtons(name, answer) : null,
  );
}

function feedbackButtons(name, answer) {
  const outcome = h("p", { class: "feedback-outcome", "aria-live": "polite" });
  const labels = Object.keys(answer.probabilities);
  return h(
    "div",
    { class: "feedback" },
    h("p", {}, "Was it right? Tell the filter what this message is:"),
    labels.map((label) =>
      h(
        "button",
        {
          type: "button",
          class: "secondary",
          on: {
            click: async (event) => {
              event.target.disabled = true;
              try {
                const result = await post(`${modelPath(name)}/feedback`, { message_id: answer.message_id, label });
                outcome.textContent = result.previous_label && result.previous_label !== result.label
                  ? `Relabelled from ${result.previous_label} to ${result.label}.`
                  : result.changed
                    ? `Learned as ${result.label}.`
                    : `Already known as ${result.label}.`;
              } catch (error) {
                outcome.textContent = errorText(error);
              } finally {
                event.target.disabled = false;
              }
            },
          },
        },
        `Mark as ${label}`,
      ),
    ),
    outcome,
  );
}

// --- learn -------------------------------------------------------------------------------------

async function renderLearn(argument, view) {
  const name = await chosenModel(argument);
  const picker = await modelPicker(name, "learn");
  let classes = ["spam", "ham"];
  if (can("admin")) classes = (await get(modelPath(name))).classes;
  // No class preselected: learning a batch of spam as ham by overlooking a default is costly.
  const label = h("select", { name: "label" },
    h("option", { value: "", disabled: true, selected: true }, "Choose a class…"),
    classes.map((one) => h("option", { value: one }, one)));
  const labelField = field("Learn them as", label);
  const files = h("input", { type: "file", name: "files", multiple: true, accept: ".eml,.mbox,.txt,message/rfc822,application/mbox" });
  const progress = h("progress", { max: 1, value: 0, hidden: true });
  progress.id = uid("progress");
  const progressLabel = h("label", { for: progress.id, class: "progress-label", hidden: true }, "Progress");
  const report = h("pre", { class: "report", "aria-live": "polite" });
  const button = h("button", { type: "submit" }, "Learn");
  const filesField = field("Mail files: .eml files or an mbox", files, { wide: true });
  const form = h(
    "form",
    {
      class: "card",
      on: {
        submit: async (event) => {
          event.preventDefault();
          filesField.showError("");
          labelField.showError("");
          if (!label.value) {
            labelField.showError("Choose the class of these messages first.");
            label.focus();
            return;
          }
          if (!files.files.length) {
            filesField.showError("Choose one or more files first.");
            return;
          }
          button.disabled = true;
          try {
            await learn(name, label.value, files.files, { progress, progressLabel, report });
          } catch (error) {
            filesField.showError(errorText(error));
          } finally {
            button.disabled = false;
          }
        },
      },
    },
    labelField,
    filesField,
    button,
    progressLabel,
    progress,
  );
  fill(view, h("div", { class: "page-head" }, h("h1", {}, "Learn from mail"), picker), form, report);
}

/** A 4xx about the messages themselves (not the key, not the server's load). */
function refusedForItsMessages(error) {
  return error instanceof ApiError && error.status >= 400 && error.status < 500 && ![401, 403, 429].includes(error.status);
}

async function learn(name, label, fileList, { progress, progressLabel, report }) {
  const started = performance.now();
  const items = await readMessages([...fileList]);
  const summary = { trained: 0, known: 0, relabelled: 0, refused: new Map() };
  const count = (result) => {
    if (!result.changed) summary.known += 1;
    else if (result.previous_label === null) summary.trained += 1;
    else summary.relabelled += 1;
  };
  const refuse = (origin, error) => {
    const kind = error.code || "error";
    if (!summary.refused.has(kind)) summary.refused.set(kind, { reason: error.message, origins: [] });
    summary.refused.get(kind).origins.push(origin);
  };
  progress.hidden = progressLabel.hidden = false;
  progress.max = Math.max(1, items.length);
  progress.value = 0;
  let done = 0;
  for (const group of batches(items)) {
    try {
      const answer = await post(`${modelPath(name)}/train/batch`, {
        items: group.map((item) => ({ label, raw: item.raw })),
      });
      answer.results.forEach(count);
    } catch (error) {
      if (!refusedForItsMessages(error)) throw error;
      // A refused message refuses its whole batch (one transaction): send them one by one,
      // so that only the bad ones are left out.
      for (const item of group) {
        try {
          if (group.length === 1) throw error; // already refused alone
          count(await post(`${modelPath(name)}/train`, { label, raw: item.raw }));
        } catch (itemError) {
          if (!refusedForItsMessages(itemError)) throw itemError;
          refuse(item.origin, itemError);
        }
      }
    }
    done += group.length;
    progress.value = done;
    report.textContent = `${done} of ${items.length} messages sent…`;
  }
  const seconds = (performance.now() - started) / 1000;
  const refusedCount = [...summary.refused.values()].reduce((sum, one) => sum + one.origins.length, 0);
  const lines = [
    `model ${name}: ${items.length} messages in ${seconds.toFixed(1)} s (${number(Math.round(items.length / Math.max(seconds, 0.001)))} messages/s)`,
    `  trained        ${summary.trained}`,
    `  already known  ${summary.known}`,
    `  relabelled     ${summary.relabelled}`,
    `  refused        ${refusedCount}`,
  ];
  for (const [kind, { reason, origins }] of [...summary.refused].sort((a, b) => b[1].origins.length - a[1].origins.length)) {
    const more = origins.length - 5;
    lines.push(`    ${origins.length} ${kind}, e.g. ${reason}: ${origins.slice(0, 5).join(", ")}${more > 0 ? `, and ${more} more` : ""}`);
  }
  report.textContent = lines.join("\n");
}

// --- settings of a model --------------------------------------------------------------------------

// The form for a model's options is built from their one declaration, as /openapi.json
// describes it (UpdateModelRequest): each option's kind, choices and description.
let optionSpecs = null;

/** option -> { kind: "choice" | "number" | "integer" | "words", choices, hint }, once a page. */
function loadOptionSpecs() {
  optionSpecs ||= get("openapi.json").then((schema) => {
    const { properties } = schema.components.schemas.UpdateModelRequest;
    return Object.fromEntries(Object.entries(properties).map(([option, property]) => [option, optionSpec(property)]));
  }).catch((error) => {
    optionSpecs = null;
    throw error;
  });
  return optionSpecs;
}

function optionSpec(property) {
  const kinds = (property.anyOf || [property]).filter((one) => one.type !== "null");
  // On the form an empty field is what the API calls null.
  const words = property.description && property.description.replaceAll("`", "").replace(/\bnull\b/g, "empty");
  const hint = words ? sentence(words) : null;
  if (kinds.length > 1) return { kind: "words", hint }; // a list's name, or its words
  const [only] = kinds;
  if (only.enum) return { kind: "choice", choices: only.enum, hint };
  if (only.type === "integer" || only.type === "number") return { kind: only.type, hint };
  return { kind: "any", hint };
}

function sentence(text) {
  const capital = text.charAt(0).toUpperCase() + text.slice(1);
  return /[.!?]$/.test(capital) ? capital : `${capital}.`;
}

/** An option's default as the Settings page shows it. */
function shownDefault(value) {
  if (value === null || value === undefined) return "none";
  return Array.isArray(value) ? value.join(", ") : String(value);
}

// The API's refusals of an option, in words: the checker's phrasing ("Input should be …",
// "Value error, …") and field paths are rewritten; a message it does not know stays as it is.
const PLAIN_WORDS = [
  [/^config: /, ""],
  [/Value error, /g, ""],
  [/Input should be greater than or equal to/g, "must be at least"],
  [/Input should be less than or equal to/g, "must be at most"],
  [/Input should be greater than/g, "must be more than"],
  [/Input should be less than/g, "must be less than"],
  [/Input should be a valid integer(, unable to parse string as an integer)?/g, "must be a whole number"],
  [/Input should be a valid number(, unable to parse string as a number)?/g, "must be a number"],
  [/Input should be a finite number/g, "must be a number"],
  [/Input should be /g, "must be "],
  [/^stop_words\.[^:]*: .*$/, "stop_words: english, none, or words separated by commas"],
];

function plainError(message) {
  return PLAIN_WORDS.reduce((text, [pattern, words]) => text.replace(pattern, words), message);
}

function optionControl(spec, option, value) {
  if (spec.kind === "choice") {
    return h("select", { name: option }, spec.choices.map((one) => h("option", { value: one, selected: one === value }, one)));
  }
  if (spec.kind === "number" || spec.kind === "integer") {
    return h("input", { type: "number", name: option, step: spec.kind === "integer" ? "1" : "any", value: value === null ? "" : String(value), inputmode: "decimal" });
  }
  if (spec.kind === "words") {
    return h("input", { type: "text", name: option, value: Array.isArray(value) ? value.join(", ") : String(value) });
  }
  return h("input", { type: "text", name: option, value: value === null ? "" : typeof value === "string" ? value : JSON.stringify(value) });
}

function optionValue(spec, control) {
  const raw = control.value.trim();
  if (spec.kind === "choice") return raw;
  if (spec.kind === "number" || spec.kind === "integer") {
    if (raw === "") return null;
    const parsed = Number(raw);
    return Number.isNaN(parsed) ? raw : parsed;
  }
  if (spec.kind === "words") {
    if (raw === "english" || raw === "none") return raw;
    return raw.split(",").map((word) => word.trim()).filter(Boolean);
  }
  if (raw === "") return null;
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

async function renderSettings(argument, view) {
  const name = await chosenModel(argument);
  const [picker, model, specs] = await Promise.all([modelPicker(name, "settings"), get(modelPath(name)), loadOptionSpecs()]);
  const fields = {};
  const controls = {};
  const spec = (option) => specs[option] || { kind: "any" };
  const known = Object.keys(specs).filter((option) => option in model.config);
  const others = Object.keys(model.config).filter((option) => !(option in specs));
  const defaults = model.defaults || {};
  for (const option of [...known, ...others]) {
    controls[option] = optionControl(spec(option), option, model.config[option]);
    const hint = [spec(option).hint, option in defaults ? `Default: ${shownDefault(defaults[option])}.` : null];
    fields[option] = field(option, controls[option], { hint: hint.filter(Boolean).join(" ") });
  }
  const outcome = h("p", { class: "outcome", role: "status" });
  const button = h("button", { type: "submit" }, "Save");
  const form = h(
    "form",
    {
      class: "card settings",
      novalidate: true,
      on: {
        submit: async (event) => {
          event.preventDefault();
          Object.values(fields).forEach((one) => one.showError(""));
          outcome.textContent = "";
          const changes = {};
          for (const [option, control] of Object.entries(controls)) {
            const value = optionValue(spec(option), control);
            if (JSON.stringify(value) !== JSON.stringify(model.config[option])) changes[option] = value;
          }
          if (!Object.keys(changes).length) {
            outcome.textContent = "Nothing changed.";
            return;
          }
          button.disabled = true;
          try {
            const saved = await patch(modelPath(name), changes);
            model.config = saved.config;
            outcome.textContent = `Saved: ${Object.keys(changes).join(", ")}.`;
          } catch (error) {
            const message = error instanceof ApiError ? plainError(error.message) : errorText(error);
            // The API names the field it refused; show the error there (longest name first,
            // so spam_threshold is not taken for a shorter name inside it).
            const names = Object.keys(fields).sort((a, b) => b.length - a.length);
            const named = names.find((option) => message.includes(option) && option in changes) ||
              names.find((option) => message.includes(option));
            if (named) {
              fields[named].showError(message);
              controls[named].focus();
            } else {
              outcome.textContent = message;
            }
          } finally {
            button.disabled = false;
          }
        },
      },
    },
    h("div", { class: "grid-fields" }, Object.values(fields)),
    button,
    outcome,
  );
  fill(
    view,
    h("div", { class: "page-head" }, h("h1", {}, `Settings of ${name}`), picker),
    h("p", { class: "lede" }, `Classes: ${model.classes.join(", ")}. Changes apply to the next message; counts are kept.`),
    form,
  );
}

// --- keys ----------------------------------------------------------------------------------------

async function renderKeys(_argument, view) {
  const [listing, names] = await Promise.all([get("v1/keys"), modelNames()]);
  // No scope is ticked for you. In development mode the first key must be an admin key (the
  // server refuses any other: it would end development mode and lock you out), so it comes first.
  const developing = state.identity.development_mode;
  const scopeBoxes = (developing ? ["admin", "train", "classify"] : ["classify", "train", "admin"]).map((scope) => {
    const box = h("input", { type: "checkbox", name: "scopes", value: scope });
    box.id = uid(`scope-${scope}`);
    return { scope, box };
  });
  const nameInput = h("input", { type: "text", name: "name", maxlength: 100 });
  const modelsInput = h("input", { type: "text", name: "models", placeholder: "all models" });
  const modelsField = field("Limit to models", modelsInput, { hint: `Names separated by commas (${names.join(", ")}); empty: every model.` });
  const scopesError = h("p", { class: "field-error", hidden: true });
  const created = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    {
      class: "card",
      on: {
        submit: async (event) => {
          event.preventDefault();
          scopesError.hidden = true;
          modelsField.showError("");
          const scopes = scopeBoxes.filter((one) => one.box.checked).map((one) => one.scope);
          if (!scopes.length) {
            scopesError.textContent = "Pick at least one scope.";
            scopesError.hidden = false;
            return;
          }
          const models = modelsInput.value.split(",").map((one) => one.trim()).filter(Boolean);
          try {
            const made = await post("v1/keys", { scopes, models: models.length ? models : null, name: nameInput.value });
            const secret = h("input", { type: "text", readonly: true, value: made.key, class: "secret" });
            fill(
              created,
              h(
                "div",
                { class: "notice success" },
                h("p", {}, "New key ", h("code", {}, made.key_id), ". Copy it now: it is shown this once."),
                field("Secret key", secret, { wide: true }),
              ),
            );
            secret.select();
            if (developing && scopes.includes("admin") && !models.length) {
              // Development mode ended with this key: the page goes on with it, not locked out.
              session.key = made.key;
              state.identity = await get("v1/keys/me");
              renderChrome();
              say("Development mode has ended: this page now uses the new admin key. Copy it now: it is shown this once.", "info");
            }
            fill(table, keyRows((await get("v1/keys")).keys));
          } catch (error) {
            if (error instanceof ApiError && error.code !== "last_admin_key" && /model/i.test(error.message)) modelsField.showError(errorText(error));
            else {
              scopesError.textContent = errorText(error);
              scopesError.hidden = false;
            }
          }
        },
      },
    },
    h("h2", {}, "Create a key"),
    field("Name (who uses it)", nameInput),
    h(
      "fieldset",
      {},
      h("legend", {}, "Scopes"),
      scopeBoxes.map(({ scope, box }) => h("div", { class: "check" }, box, h("label", { for: box.id }, scope))),
      scopesError,
    ),
    modelsField,
    h("button", { type: "submit" }, "Create key"),
    created,
  );
  const table = h("tbody", {}, keyRows(listing.keys));
  fill(
    view,
    h("h1", {}, "API keys"),
    h(
      "section",
      { class: "card" },
      h(
        "div",
        { class: "scroll" },
        h(
          "table",
          { class: "keys" },
          h("caption", {}, "Keys, newest last. Secrets are never shown again."),
          h("thead", {}, h("tr", {}, ["Key id", "Name", "Scopes", "Models", "Created", "Status", ""].map((title) => h("th", { scope: "col" }, title)))),
          table,
        ),
      ),
    ),
    form,
  );
}

function keyRows(keys) {
  const own = key() && key().key_id;
  return keys.map((one) =>
    h(
      "tr",
      { "data-key-id": one.key_id },
      h("td", {}, h("code", {}, one.key_id)),
      h("td", {}, one.name),
      h("td", {}, one.scopes.join(", ")),
      h("td", {}, one.models === null ? "all" : one.models.join(", ")),
      h("td", {}, when(one.created_at)),
      h("td", {}, one.revoked_at ? `revoked ${when(one.revoked_at)}` : "active"),
      h(
        "td",
        {},
        one.revoked_at
          ? null
          : h(
              "button",
              {
                type: "button",
                class: "danger",
                "aria-label": `Revoke key ${one.key_id}`,
                on: {
                  click: async () => {
                    const warning = one.key_id === own ? " This is the key you are signed in with." : "";
                    if (!window.confirm(`Revoke the key ${one.key_id}?${warning} It stops working within a second.`)) return;
                    try {
                      await del(`v1/keys/${encodeURIComponent(one.key_id)}`);
                      say(`Revoked the key ${one.key_id}.`, "success");
                      await route();
                    } catch (error) {
                      say(errorText(error), "error");
                    }
                  },
                },
              },
              "Revoke",
            ),
      ),
    ),
  );
}

const RENDERERS = {
  overview: renderOverview,
  model: renderModel,
  scan: renderScan,
  learn: renderLearn,
  settings: renderSettings,
  keys: renderKeys,
};

// --- start ---------------------------------------------------------------------------------------

async function boot() {
  const hadKey = Boolean(session.key);
  try {
    const identity = await get("v1/keys/me");
    await start(identity);
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      if (!hadKey) renderSignIn(null); // else signed out already, with the reason
    } else {
      fill(root, h("p", { class: "error" }, `The server did not answer: ${errorText(error)}`));
    }
  }
}

boot();
