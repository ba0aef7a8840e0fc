// Notes are markdown: a small renderer for what notes use (headings, paragraphs, lists, code
// blocks, inline code, bold, italic, links). It builds DOM nodes; text always goes in as text
// nodes and only http(s) links become anchors, so a note can never inject markup or script.

import { h } from "./dom";

const INLINE = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*]+\*|_[^_]+_)|(\[[^\]]+\]\([^)\s]+\))/g;

function inline(text: string): Node[] {
  const out: Node[] = [];
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    const at = m.index ?? 0;
    if (at > last) out.push(document.createTextNode(text.slice(last, at)));
    const token = m[0];
    if (m[1]) out.push(h("code", {}, token.slice(1, -1)));
    else if (m[2]) out.push(h("strong", {}, token.slice(2, -2)));
    else if (m[3]) out.push(h("em", {}, token.slice(1, -1)));
    else {
      const close = token.indexOf("](");
      const label = token.slice(1, close);
      const href = token.slice(close + 2, -1);
      out.push(/^https?:\/\//.test(href) ? h("a", { href, title: href }, label) : document.createTextNode(token));
    }
    last = at + token.length;
  }
  if (last < text.length) out.push(document.createTextNode(text.slice(last)));
  return out;
}

/** The markdown `text` as a fragment of block elements. */
export function markdown(text: string): DocumentFragment {
  const out = document.createDocumentFragment();
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  let paragraph: string[] = [];
  let list: HTMLElement | null = null;
  const flush = () => {
    if (paragraph.length) out.appendChild(h("p", {}, ...inline(paragraph.join(" "))));
    paragraph = [];
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    if (line.startsWith("```")) {
      flush();
      const code: string[] = [];
      for (i++; i < lines.length && !(lines[i] ?? "").startsWith("```"); i++) code.push(lines[i] ?? "");
      out.appendChild(h("pre", {}, h("code", {}, code.join("\n"))));
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const item = /^\s*(?:[-*+]|(\d+)\.)\s+(.*)$/.exec(line);
    if (heading) {
      flush();
      const level = Math.min((heading[1] ?? "#").length + 1, 6);
      out.appendChild(h(`h${level}` as "h2", {}, ...inline(heading[2] ?? "")));
    } else if (item) {
      if (paragraph.length) flush();
      const kind = item[1] ? "ol" : "ul";
      if (!list || list.tagName.toLowerCase() !== kind) {
        list = h(kind, {});
        out.appendChild(list);
      }
      list.appendChild(h("li", {}, ...inline(item[2] ?? "")));
    } else if (line.trim() === "") {
      flush();
    } else {
      list = null;
      paragraph.push(line.trim());
    }
  }
  flush();
  return out;
}
