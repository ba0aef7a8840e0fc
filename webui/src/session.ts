// Who is logged in, and the way to the login page and back. The session itself is the
// master's HttpOnly cookie: the app never sees its token, only the user it stands for.

import type { User } from "./api/types";

export const LOGIN_PAGE = "/login";
export const HOME = "/experiments";

// Any origin will do: it only tells paths on this app from addresses elsewhere.
const HERE = "http://app.invalid";

/**
 * `path` (with its query) if it is a page of this app to come back to, else the home page.
 * Anything that would leave the origin ("//evil.example", "/\\evil.example", "https://...")
 * is refused: the login page must not be an open redirect.
 */
export function safeNext(path: string): string {
  if (!path.startsWith("/")) return HOME;
  let url: URL;
  try {
    url = new URL(path, HERE);
  } catch {
    return HOME;
  }
  if (url.origin !== HERE || url.pathname === "/" || url.pathname === LOGIN_PAGE) return HOME;
  return `${url.pathname}${url.search}${url.hash}`;
}

/** The login page's address, remembering `from` to come back to after logging in. */
export function loginPath(from: string): string {
  const next = safeNext(from);
  return next === HOME ? LOGIN_PAGE : `${LOGIN_PAGE}?next=${encodeURIComponent(next)}`;
}

/** Where the login page sends the user once logged in (its `?next=`, checked). */
export function nextPath(search: string): string {
  return safeNext(new URLSearchParams(search).get("next") ?? "");
}

/** The logged-in user as the app knows it, with listeners (the header). */
export class CurrentUser {
  private user: User | null = null;
  private readonly listeners = new Set<(user: User | null) => void>();

  get(): User | null {
    return this.user;
  }

  set(user: User | null): void {
    this.user = user;
    for (const listener of this.listeners) listener(user);
  }

  /** Calls `listener` now and on every change; returns what unsubscribes it. */
  subscribe(listener: (user: User | null) => void): () => void {
    this.listeners.add(listener);
    listener(this.user);
    return () => this.listeners.delete(listener);
  }
}

export const currentUser = new CurrentUser();
