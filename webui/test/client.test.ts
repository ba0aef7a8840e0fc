import { afterEach, describe, expect, it, vi } from "vitest";
import { api, ApiError, requestInit, whenUnauthenticated } from "../src/api/client";
import { decode, DecodeError } from "../src/api/decode";
import * as t from "../src/api/types";

// As the master writes it (protojson.to_dict(v1.User)), inside login's and /api/v1/me's answers.
const USER = {
  id: 1,
  username: "admin",
  admin: true,
  active: true,
  modifiedAt: "2026-11-22T10:31:49.800Z",
  displayName: "",
  remote: false,
};

describe("the user decoder", () => {
  it("decodes the user that login and /api/v1/me answer", () => {
    const want = { id: 1, username: "admin", admin: true, active: true };
    expect(decode(t.user, USER)).toEqual(want);
    expect(decode(t.loginAnswer, { token: "", user: USER })).toEqual(want);
    expect(decode(t.meAnswer, { user: USER })).toEqual(want);
  });

  it("names a wrong field", () => {
    expect(() => decode(t.user, { ...USER, admin: "yes" }, "response")).toThrow(/response.admin: expected true or false/);
    expect(() => t.user({ ...USER, username: undefined })).toThrow(DecodeError);
  });
});

describe("requests", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    whenUnauthenticated(() => {});
  });

  it("sends every POST as application/json with a JSON body, {} when there is nothing to send", () => {
    const empty = requestInit("POST");
    expect(empty.headers).toEqual({ "Content-Type": "application/json" });
    expect(empty.body).toBe("{}");
    expect(empty.credentials).toBe("same-origin");
    const updates = requestInit("POST", [{ jobId: "j", priority: 3 }]);
    expect(updates.headers).toEqual({ "Content-Type": "application/json" });
    expect(JSON.parse(updates.body as string)).toEqual([{ jobId: "j", priority: 3 }]);
  });

  it("sends no body with GET and DELETE", () => {
    for (const method of ["GET", "DELETE"]) {
      const init = requestInit(method);
      expect(init.body).toBeNull();
      expect(init.headers).toEqual({});
    }
  });

  // fetch is the boundary here: the master's answers, as it writes them.
  const answer = (status: number, body: unknown) =>
    vi.fn(async (_path: string, _init: RequestInit) => new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } }));

  it("a 401 from any call sends the user to log in, and the call fails with the master's message", async () => {
    const fetch = answer(401, { error: { code: 16, reason: "Unauthenticated", error: "no credentials: log in first" } });
    vi.stubGlobal("fetch", fetch);
    const lost = vi.fn();
    whenUnauthenticated(lost);
    await expect(api.experimentAction(3, "pause")).rejects.toThrow("no credentials: log in first");
    expect(lost).toHaveBeenCalledTimes(1);
    const [path, init] = fetch.mock.calls[0] as [string, RequestInit];
    expect(path).toBe("/api/v1/experiments/3/pause");
    expect(init.method).toBe("POST");
    expect(init.headers).toEqual({ "Content-Type": "application/json" });
    expect(init.body).toBe("{}");
  });

  it("a wrong password is the login page's to show, not a trip to the login page", async () => {
    vi.stubGlobal("fetch", answer(401, { error: { code: 16, reason: "Unauthenticated", error: "invalid username or password" } }));
    const lost = vi.fn();
    whenUnauthenticated(lost);
    const failed = await api.login("admin", "nope").catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(ApiError);
    expect((failed as ApiError).message).toBe("invalid username or password");
    expect((failed as ApiError).status).toBe(401);
    expect(lost).not.toHaveBeenCalled();
  });

  it("logs in with the username and password as JSON and decodes the user", async () => {
    const fetch = answer(200, { token: "", user: USER });
    vi.stubGlobal("fetch", fetch);
    expect((await api.login("admin", "s3cret")).username).toBe("admin");
    const [path, init] = fetch.mock.calls[0] as [string, RequestInit];
    expect(path).toBe("/api/v1/auth/login");
    expect(JSON.parse(init.body as string)).toEqual({ username: "admin", password: "s3cret" });
  });

  it("a forbidden action is an error with the master's message, and no trip to the login page", async () => {
    vi.stubGlobal("fetch", answer(403, {
        error: { code: 7, reason: "PermissionDenied", error: "only the owner of experiment 3 (alice) or an admin may kill it" },
      }));
    const lost = vi.fn();
    whenUnauthenticated(lost);
    await expect(api.experimentAction(3, "kill")).rejects.toThrow(/only the owner of experiment 3 \(alice\)/);
    expect(lost).not.toHaveBeenCalled();
  });
});
