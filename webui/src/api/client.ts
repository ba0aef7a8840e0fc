// The typed API client: one function per route, every answer decoded before use.

import { type Decoder, DecodeError, decode } from "./decode";
import * as org from "./org";
import * as t from "./types";

/** What a page shows when a call fails: the master's own message when it sent one. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

type Query = Record<string, string | number | boolean | readonly (string | number)[] | undefined>;

export function queryString(query: Query): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined || value === "") continue;
    if (Array.isArray(value)) {
      for (const v of value) params.append(key, String(v));
    } else {
      params.set(key, String(value));
    }
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

export const LOGIN_ROUTE = "/api/v1/auth/login";

let onUnauthenticated: () => void = () => {};
let onDiskFull: () => void = () => {};

/**
 * What to do when the master answers 401 (no session, or it ended): the frame sends the user
 * to the login page. Login's own 401 (a wrong password) is the login page's to show.
 */
export function whenUnauthenticated(handler: () => void): void {
  onUnauthenticated = handler;
}

/** What to do when the master answers 507 (its disk is full): the frame shows the banner. */
export function whenDiskFull(handler: () => void): void {
  onDiskFull = handler;
}

// The master takes a state-changing call only as application/json from its own origin: a
// page on another site cannot send that without a CORS preflight, which the master refuses.
const BODY_METHODS = new Set(["POST", "PUT", "PATCH"]);

/** The fetch options of one call: POST, PUT and PATCH always carry a JSON body (`{}` if none). */
export function requestInit(method: string, body?: unknown): RequestInit {
  const json = body !== undefined || BODY_METHODS.has(method);
  return {
    method,
    // The session is the HttpOnly det_session cookie, sent to this origin only.
    credentials: "same-origin",
    headers: json ? { "Content-Type": "application/json" } : {},
    body: json ? JSON.stringify(body ?? {}) : null,
  };
}

async function call<T>(method: string, path: string, decoder: Decoder<T>, body?: unknown): Promise<T> {
  let response: Response;
  try {
    response = await fetch(path, requestInit(method, body));
  } catch {
    throw new ApiError("cannot reach the master; is it running?", 0);
  }
  if (response.status === 401 && path !== LOGIN_ROUTE) onUnauthenticated();
  if (response.status === 507) onDiskFull();
  let payload: unknown;
  try {
    payload = await response.json();
  } catch {
    throw new ApiError(`the master answered ${response.status} without JSON (${path})`, response.status);
  }
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      message = decode(t.errorBody, payload).error;
    } catch {
      // Keep the status line.
    }
    throw new ApiError(message, response.status);
  }
  try {
    return decode(decoder, payload);
  } catch (e) {
    if (e instanceof DecodeError) throw new ApiError(`unexpected answer from ${path}: ${e.message}`, response.status);
    throw e;
  }
}

/**
 * A streamed answer (Determined's streaming routes: one JSON document a line), read whole:
 * each line decoded with `decoder`. A failure before the stream is an error as `call`'s are.
 */
async function callLines<T>(path: string, decoder: Decoder<T>): Promise<T[]> {
  let response: Response;
  try {
    response = await fetch(path, requestInit("GET"));
  } catch {
    throw new ApiError("cannot reach the master; is it running?", 0);
  }
  if (response.status === 401) onUnauthenticated();
  const text = await response.text();
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      message = decode(t.errorBody, JSON.parse(text)).error;
    } catch {
      // Keep the status line.
    }
    throw new ApiError(message, response.status);
  }
  try {
    return text
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map((line, i) => decode(decoder, JSON.parse(line), `line ${i + 1}`));
  } catch (e) {
    if (e instanceof DecodeError || e instanceof SyntaxError) {
      throw new ApiError(`unexpected answer from ${path}: ${e.message}`, response.status);
    }
    throw e;
  }
}

const ignore: Decoder<null> = () => null;

export type ExperimentAction = "activate" | "pause" | "cancel" | "kill" | "archive" | "unarchive";

/** GET /api/v1/experiments's parameters (Determined's GetExperimentsRequest). */
export interface ExperimentQuery {
  limit?: number;
  offset?: number;
  /** SORT_BY_ID, SORT_BY_START_TIME, ... */
  sortBy?: string;
  orderBy?: "ORDER_BY_ASC" | "ORDER_BY_DESC";
  name?: string;
  states?: readonly string[];
  archived?: boolean;
  /** Only this project's experiments (Determined's query parameter). */
  projectId?: number;
  /** Only experiments with every one of these labels. */
  labels?: readonly string[];
  /** Only these owners' experiments (usernames). */
  users?: readonly string[];
}

/** GET /api/v1/trials/{id}/logs's parameters (Determined's TrialLogsRequest, and pydet's
 * head, tail and afterId). */
export interface LogQuery {
  head?: number;
  tail?: number;
  afterId?: number;
  rankIds?: readonly number[];
  /** DEBUG, INFO, ... */
  levels?: readonly string[];
  searchText?: string;
}

export interface MetricQuery {
  group?: string;
  afterSteps?: number;
  limit?: number;
  /** At most about this many reports per group, evenly spaced (first and last kept). */
  maxPoints?: number;
}

export const api = {
  experiments: (q: ExperimentQuery) =>
    call("GET", `/api/v1/experiments${queryString({ ...q })}`, t.experimentList),
  experiment: (id: number) => call("GET", `/api/v1/experiments/${id}`, t.experimentDetail),
  experimentTrials: (id: number) => call("GET", `/api/v1/experiments/${id}/trials`, t.trialList),
  experimentCheckpoints: (id: number) =>
    call("GET", `/api/v1/experiments/${id}/checkpoints`, t.checkpointList),
  experimentAction: (id: number, action: ExperimentAction) =>
    call("POST", `/api/v1/experiments/${id}/${action}`, t.experimentAction),
  deleteExperiment: (id: number) => call("DELETE", `/api/v1/experiments/${id}`, ignore),
  createExperiment: (body: { config: string; parentId: number; activate: boolean }) =>
    call("POST", "/api/v1/experiments", t.created, body),
  trial: (id: number) => call("GET", `/api/v1/trials/${id}`, t.trialOne),
  trialMetrics: (id: number, q: MetricQuery = {}) =>
    call("GET", `/api/v1/trials/${id}/metrics${queryString({ ...q })}`, t.metricReports),
  trialCheckpoints: (id: number) => call("GET", `/api/v1/trials/${id}/checkpoints`, t.checkpointList),
  trialLogs: (id: number, q: LogQuery) =>
    callLines(`/api/v1/trials/${id}/logs${queryString({ ...q })}`, t.streamLine(t.taskLog)),
  killTrial: (id: number) => call("POST", `/api/v1/trials/${id}/kill`, ignore),
  agents: () => call("GET", "/api/v1/agents", t.cluster),
  resourcePools: () => call("GET", "/api/v1/resource-pools", t.resourcePoolList),
  jobs: (pool: string) => call("GET", `/api/v1/jobs${queryString({ resourcePool: pool })}`, t.jobList),
  updateJobs: (updates: t.JobUpdate[]) => call("POST", "/api/v1/jobs/update", ignore, updates),
  login: (username: string, password: string) => call("POST", LOGIN_ROUTE, t.loginAnswer, { username, password }),
  logout: () => call("POST", "/api/v1/auth/logout", ignore),
  workspaces: () => call("GET", "/api/v1/workspaces", org.workspaceList),
  workspaceProjects: (id: number) => call("GET", `/api/v1/workspaces/${id}/projects`, org.projectList),
  /** Every workspace's projects in one request (Determined reads workspace id 0 as "all"). */
  allProjects: () => call("GET", "/api/v1/workspaces/0/projects", org.projectList),
  project: (id: number) => call("GET", `/api/v1/projects/${id}`, org.projectOne),
  putProjectNotes: (id: number, notes: org.Note[]) =>
    call("PUT", `/api/v1/projects/${id}/notes`, org.noteList, { notes, projectId: id }),
  moveExperiment: (id: number, projectId: number) =>
    call("POST", `/api/v1/experiments/${id}/move`, ignore, { destinationProjectId: projectId, experimentId: id }),
  models: () => call("GET", "/api/v1/models", org.modelList),
  model: (name: string) => call("GET", `/api/v1/models/${encodeURIComponent(name)}`, org.modelOne),
  createModel: (body: { name: string; description: string }) => call("POST", "/api/v1/models", org.modelOne, body),
  modelVersions: (name: string) =>
    call("GET", `/api/v1/models/${encodeURIComponent(name)}/versions`, org.modelVersionList),
  registerVersion: (model: string, body: { checkpointUuid: string; name: string; notes: string; labels: string[] }) =>
    call("POST", `/api/v1/models/${encodeURIComponent(model)}/versions`, org.modelVersionOne, body),
  me: () => call("GET", "/api/v1/me", t.meAnswer),
  master: () => call("GET", "/api/v1/master", t.masterInfo),
  tensorboards: () => call("GET", "/api/v1/tensorboards", t.tensorboardList),
  tensorboard: (id: string) => call("GET", `/api/v1/tensorboards/${encodeURIComponent(id)}`, t.tensorboardOne),
  launchTensorboard: (body: { experimentIds: number[]; trialIds: number[] }) =>
    call("POST", "/api/v1/tensorboards", t.tensorboardOne, body),
  commands: () => call("GET", "/api/v1/commands", t.commandList),
  notebooks: () => call("GET", "/api/v1/notebooks", t.notebookList),
  shells: () => call("GET", "/api/v1/shells", t.shellList),
  launchNotebook: (body: { config: Record<string, unknown>; templateName: string }) =>
    call("POST", "/api/v1/notebooks", t.notebookOne, body),
  /** Kill a command, notebook, shell or TensorBoard (`kind`: "commands", "notebooks", ...). */
  killTask: (kind: TaskKind, id: string) => call("POST", `/api/v1/${kind}/${encodeURIComponent(id)}/kill`, ignore),
  /** A task's lines (Determined's TaskLogs stream, read to its end). */
  taskLogs: (id: string, q: { tail?: number; afterId?: number }) =>
    callLines(`/api/v1/tasks/${encodeURIComponent(id)}/logs${queryString({ ...q })}`, t.streamLine(t.taskLog)),
};

export type TaskKind = "commands" | "notebooks" | "shells" | "tensorboards";

export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}
