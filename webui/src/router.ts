// Client-side routes: history.pushState for in-app links, the master serves index.html
// for every non-API path so a reload lands on the same page.

export type Params = Record<string, string>;

export interface PageContext {
  /** Go to `path`; `replace` swaps the current history entry instead of adding one. */
  navigate(path: string, replace?: boolean): void;
  /** Show whether live updates are flowing. */
  setLive(live: boolean): void;
}

/** Mounts a page into `root`; returns what unmounts it (closes streams, timers, charts). */
export type Page = (root: HTMLElement, params: Params, ctx: PageContext) => () => void;

/** A page whose module is fetched on first use; a failed fetch is shown, not thrown. */
export function lazy(load: () => Promise<Page>): Page {
  let loaded: Page | null = null;
  return (root, params, ctx) => {
    let unmount: (() => void) | null = null;
    let gone = false;
    const mount = (page: Page) => {
      if (!gone) unmount = page(root, params, ctx);
    };
    if (loaded) {
      mount(loaded);
    } else {
      load().then(
        (page) => {
          loaded = page;
          mount(page);
        },
        () => {
          if (gone) return;
          const p = document.createElement("p");
          p.className = "notice error";
          p.textContent = "Could not load this page's code; reload to try again.";
          root.replaceChildren(p);
        },
      );
    }
    return () => {
      gone = true;
      unmount?.();
    };
  };
}

export interface Route {
  pattern: string;
  page: Page;
  nav?: string;
}

interface Compiled {
  regex: RegExp;
  names: string[];
  route: Route;
}

export function compile(routes: Route[]): Compiled[] {
  return routes.map((route) => {
    const names: string[] = [];
    const source = route.pattern
      .split("/")
      .map((part) => {
        if (part.startsWith(":")) {
          names.push(part.slice(1));
          return "([^/]+)";
        }
        return part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      })
      .join("/");
    return { regex: new RegExp(`^${source}/?$`), names, route };
  });
}

export function match(compiled: Compiled[], path: string): { route: Route; params: Params } | null {
  for (const c of compiled) {
    const m = c.regex.exec(path);
    if (!m) continue;
    const params: Params = {};
    c.names.forEach((name, i) => {
      params[name] = decodeURIComponent(m[i + 1] ?? "");
    });
    return { route: c.route, params };
  }
  return null;
}

export class Router {
  private readonly compiled: Compiled[];
  private unmount: (() => void) | null = null;

  constructor(
    routes: Route[],
    private readonly root: HTMLElement,
    private readonly notFound: Page,
    private readonly onChange: (route: Route | null) => void,
    private readonly setLive: (live: boolean) => void,
  ) {
    this.compiled = compile(routes);
    window.addEventListener("popstate", () => this.render());
    document.addEventListener("click", (event) => {
      if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
      const anchor = (event.target as Element | null)?.closest?.("a[data-link]");
      if (!(anchor instanceof HTMLAnchorElement)) return;
      event.preventDefault();
      this.navigate(anchor.getAttribute("href") ?? "/");
    });
  }

  navigate(path: string, replace = false): void {
    if (replace) history.replaceState(null, "", path);
    else history.pushState(null, "", path);
    this.render();
  }

  render(): void {
    this.unmount?.();
    this.unmount = null;
    while (this.root.firstChild) this.root.removeChild(this.root.firstChild);
    const found = match(this.compiled, location.pathname);
    this.onChange(found?.route ?? null);
    const ctx: PageContext = { navigate: (p, r) => this.navigate(p, r), setLive: this.setLive };
    const page = found?.route.page ?? this.notFound;
    this.unmount = page(this.root, found?.params ?? {}, ctx);
    window.scrollTo(0, 0);
  }
}
