import { describe, expect, it } from "vitest";
import { decode } from "../src/api/decode";
import * as t from "../src/api/types";
import { CurrentUser, HOME, LOGIN_PAGE, loginPath, nextPath, safeNext } from "../src/session";

const USER = { id: 1, username: "admin", admin: true, active: true, modified_at: 1795309909.8 };

describe("the way to the login page and back", () => {
  it("remembers the page, with its query, to come back to", () => {
    expect(loginPath("/experiments/3?tab=logs")).toBe(`${LOGIN_PAGE}?next=%2Fexperiments%2F3%3Ftab%3Dlogs`);
    expect(nextPath("?next=%2Fexperiments%2F3%3Ftab%3Dlogs")).toBe("/experiments/3?tab=logs");
    expect(nextPath(new URL(`http://x${loginPath("/jobs")}`).search)).toBe("/jobs");
  });

  it("needs no next for the home page, the root or the login page itself", () => {
    expect(loginPath(HOME)).toBe(LOGIN_PAGE);
    expect(loginPath("/")).toBe(LOGIN_PAGE);
    expect(loginPath(`${LOGIN_PAGE}?next=%2Fjobs`)).toBe(LOGIN_PAGE);
    expect(nextPath("")).toBe(HOME);
  });

  it("never leaves the app's origin (no open redirect)", () => {
    for (const away of [
      "//evil.example/x",
      "/\\evil.example",
      "https://evil.example/",
      "javascript:alert(1)",
      "/\t/evil.example",
      "experiments",
    ]) {
      expect(safeNext(away)).toBe(HOME);
      expect(nextPath(`?next=${encodeURIComponent(away)}`)).toBe(HOME);
    }
  });
});

describe("the current user", () => {
  it("tells listeners now and on every change until they unsubscribe", () => {
    const who = new CurrentUser();
    const seen: (string | null)[] = [];
    const stop = who.subscribe((u) => seen.push(u?.username ?? null));
    who.set(decode(t.user, USER));
    who.set(null);
    stop();
    who.set(decode(t.user, USER));
    expect(seen).toEqual([null, "admin", null]);
    expect(who.get()?.username).toBe("admin");
  });
});
