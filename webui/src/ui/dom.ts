// Building DOM nodes. Text always goes in as text nodes (never parsed as HTML).

type Child = Node | string | number | null | undefined | false;
type Props = {
  class?: string;
  title?: string;
  href?: string;
  target?: string;
  rel?: string;
  type?: string;
  value?: string;
  placeholder?: string;
  disabled?: boolean;
  checked?: boolean;
  hidden?: boolean;
  open?: boolean;
  multiple?: boolean;
  size?: number;
  role?: string;
  for?: string;
  id?: string;
  name?: string;
  min?: string;
  max?: string;
  step?: string;
  rows?: number;
  spellcheck?: boolean;
  autocomplete?: string;
  required?: boolean;
  data?: Record<string, string>;
  on?: { [K in keyof HTMLElementEventMap]?: (event: HTMLElementEventMap[K]) => void };
};

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined) continue;
    if (key === "class") el.className = value as string;
    else if (key === "data") Object.assign(el.dataset, value);
    else if (key === "on") {
      for (const [event, handler] of Object.entries(value as Record<string, EventListener>)) {
        el.addEventListener(event, handler);
      }
    } else if (typeof value === "boolean") {
      if (key in el) (el as unknown as Record<string, unknown>)[key] = value;
      else if (value) el.setAttribute(key, "");
    } else if (key === "value" && "value" in el) {
      (el as HTMLInputElement).value = String(value);
    } else el.setAttribute(key, String(value));
  }
  append(el, ...children);
  return el;
}

export function append(parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
}

export function replace(parent: Node, ...children: Child[]): void {
  while (parent.firstChild) parent.removeChild(parent.firstChild);
  append(parent, ...children);
}

/** An in-app link: the router handles the click without reloading the page. */
export function link(href: string, ...children: Child[]): HTMLAnchorElement {
  return h("a", { href, data: { link: "" } }, ...children);
}

export function button(label: string, onClick: () => void, cls = ""): HTMLButtonElement {
  return h("button", { type: "button", class: cls, on: { click: () => onClick() } }, label);
}
