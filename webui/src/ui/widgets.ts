// Small pieces every page uses: state badges, progress bars, messages, tables.

import type { State } from "../api/types";
import { h, replace } from "./dom";
import { percent, stateLabel } from "./format";

export function badge(state: State | string): HTMLElement {
  const name = state.replace(/^STATE_/, "");
  return h("span", { class: `badge state-${name.toLowerCase()}`, data: { state: name } }, stateLabel(name));
}

/** The mark of an experiment run by a script off the cluster (nothing to schedule). */
export function unmanagedTag(unmanaged: boolean): HTMLElement | string {
  return unmanaged ? h("span", { class: "badge unmanaged", title: "reported by a script off the cluster" }, "unmanaged") : "";
}

export function progress(fraction: number): HTMLElement {
  const bar = h("span", { class: "bar" });
  bar.style.width = percent(fraction);
  return h(
    "span",
    { class: "progress", title: percent(fraction) },
    h("span", { class: "track" }, bar),
    h("span", { class: "label" }, percent(fraction)),
  );
}

/** A slot for loading / error / info lines at the top of a section. */
export class Notice {
  readonly el = h("div", { class: "notice", role: "status" });

  loading(what = "Loading…"): void {
    this.el.className = "notice loading";
    replace(this.el, h("span", { class: "spinner" }), what);
  }

  error(message: string): void {
    this.el.className = "notice error";
    this.el.setAttribute("role", "alert");
    replace(this.el, message);
  }

  info(message: string): void {
    this.el.className = "notice info";
    replace(this.el, message);
  }

  clear(): void {
    this.el.className = "notice";
    replace(this.el);
  }
}

export interface Column<T> {
  title: string;
  cell: (row: T) => Node | string;
  /** Set for sortable columns: the sort key the caller understands. */
  sort?: string;
  class?: string;
}

export interface SortState {
  key: string;
  descending: boolean;
}

/** A table whose body is rebuilt on `update`; header clicks report sort changes. */
export class Table<T> {
  readonly el: HTMLTableElement;
  private readonly body = h("tbody");
  private readonly headers: HTMLTableCellElement[] = [];

  constructor(
    private readonly columns: Column<T>[],
    private readonly opts: {
      empty: string;
      rowKey?: (row: T) => string;
      sort?: SortState;
      onSort?: (sort: SortState) => void;
      rowClass?: (row: T) => string;
    },
  ) {
    const head = h("tr");
    for (const col of columns) {
      const th = h("th", { class: col.class ?? "" }, col.title);
      if (col.sort && opts.onSort) {
        const key = col.sort;
        th.classList.add("sortable");
        th.addEventListener("click", () => {
          const current = this.opts.sort;
          const descending = current?.key === key ? !current.descending : false;
          this.opts.sort = { key, descending };
          this.markSort();
          opts.onSort?.({ key, descending });
        });
      }
      this.headers.push(th);
      head.appendChild(th);
    }
    this.el = h("table", { class: "table" }, h("thead", {}, head), this.body);
    this.markSort();
  }

  private markSort(): void {
    this.columns.forEach((col, i) => {
      const th = this.headers[i];
      if (!th) return;
      th.classList.remove("asc", "desc");
      if (col.sort && this.opts.sort?.key === col.sort) th.classList.add(this.opts.sort.descending ? "desc" : "asc");
    });
  }

  update(rows: readonly T[]): void {
    const fragment = document.createDocumentFragment();
    if (rows.length === 0) {
      fragment.appendChild(h("tr", {}, h("td", { class: "empty" }, this.opts.empty)));
      (fragment.firstChild?.firstChild as HTMLTableCellElement).colSpan = this.columns.length;
    }
    for (const row of rows) {
      const tr = h("tr", { class: this.opts.rowClass?.(row) ?? "" });
      if (this.opts.rowKey) tr.dataset.key = this.opts.rowKey(row);
      for (const col of this.columns) tr.appendChild(h("td", { class: col.class ?? "" }, col.cell(row)));
      fragment.appendChild(tr);
    }
    replace(this.body, fragment);
  }
}

export function section(title: string, ...children: (Node | null)[]): HTMLElement {
  return h("section", { class: "card" }, h("h2", {}, title), ...children);
}

/** Debounce: run `f` once, `ms` after the last call. */
export function debounce<A extends unknown[]>(f: (...args: A) => void, ms: number): ((...args: A) => void) & { cancel(): void } {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const wrapped = (...args: A) => {
    if (timer !== undefined) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      f(...args);
    }, ms);
  };
  wrapped.cancel = () => {
    if (timer !== undefined) clearTimeout(timer);
  };
  return wrapped;
}

/**
 * Coalesce bursts: at most one run in flight and one queued behind it. The promise settles
 * when a run that started after the call has finished.
 */
export function coalesce(f: () => Promise<void>): () => Promise<void> {
  let current: Promise<void> | null = null;
  let queued: Promise<void> | null = null;
  const run = (): Promise<void> => {
    if (!current) {
      current = f().finally(() => {
        current = null;
      });
      return current;
    }
    if (!queued) {
      const next = () => {
        queued = null;
        return run();
      };
      queued = current.then(next, next);
    }
    return queued;
  };
  return run;
}

/** A table that shows the first `limit` rows until asked for all of them. */
export class Capped<T> {
  readonly el: HTMLElement;
  private rows: readonly T[] = [];
  private expanded = false;
  private readonly more = h("button", { type: "button", class: "small more", hidden: true });

  constructor(
    private readonly table: Table<T>,
    private readonly limit: number,
  ) {
    this.more.addEventListener("click", () => {
      this.expanded = !this.expanded;
      this.render();
    });
    this.el = h("div", { class: "table-wrap" }, table.el, this.more);
  }

  update(rows: readonly T[]): void {
    this.rows = rows;
    this.render();
  }

  private render(): void {
    const capped = !this.expanded && this.rows.length > this.limit;
    this.table.update(capped ? this.rows.slice(0, this.limit) : this.rows);
    this.more.hidden = this.rows.length <= this.limit;
    this.more.textContent = this.expanded ? "Show fewer" : `Show all ${this.rows.length}`;
  }
}
