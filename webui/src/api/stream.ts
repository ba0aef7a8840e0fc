// Live updates: one EventSource per page, filtered by the master. Events only say what
// changed; pages refetch what they show (and refetch everything after a reconnect). The
// stream is same-origin, so the browser sends the session cookie with it.

import { api } from "./client";
import { array, type Decoder, decode, int, object, optional, str } from "./decode";
import { type State, state } from "./types";

export interface ExperimentEvent {
  id: number;
  state: State;
}
export interface TrialEvent {
  id: number;
  experimentId: number;
  state: State;
}
export interface MetricsEvent {
  trialId: number;
  experimentId: number;
  groups: string[];
  stepsCompleted: number;
}
export interface LogsEvent {
  trialId: number;
}

export const decoders = {
  experiment: object<ExperimentEvent>({ id: int, state }),
  trial: object<TrialEvent>({ id: int, experimentId: int, state }),
  metrics: object<MetricsEvent>({
    trialId: int,
    experimentId: optional(int, 0),
    groups: optional(array(str), []),
    stepsCompleted: optional(int, 0),
  }),
  logs: object<LogsEvent>({ trialId: int }),
};

export interface Handlers {
  experiment?: (e: ExperimentEvent) => void;
  trial?: (e: TrialEvent) => void;
  metrics?: (e: MetricsEvent) => void;
  logs?: (e: LogsEvent) => void;
  /** Connected or reconnected, or events were dropped: refetch everything shown. */
  resync?: () => void;
  /** The connection went down or came up. */
  status?: (live: boolean) => void;
}

export interface Stream {
  close(): void;
}

type Kind = keyof typeof decoders;

export function openStream(filter: { experimentId?: number; trialId?: number }, handlers: Handlers): Stream {
  if (typeof EventSource === "undefined") return { close() {} };
  const params = new URLSearchParams();
  if (filter.experimentId) params.set("experimentId", String(filter.experimentId));
  if (filter.trialId) params.set("trialId", String(filter.trialId));
  const query = params.toString();
  const source = new EventSource(`/api/v1/stream${query ? `?${query}` : ""}`);
  let opened = false;
  source.addEventListener("open", () => {
    handlers.status?.(true);
    // The first open follows the page's own first fetch; later ones follow a gap.
    if (opened) handlers.resync?.();
    opened = true;
  });
  source.addEventListener("error", () => {
    handlers.status?.(false);
    // EventSource gives up for good on an HTTP error (a 401 once the session ended) without
    // saying which; a call to the API does, and its 401 leads to the login page.
    if (source.readyState === EventSource.CLOSED) api.me().catch(() => {});
  });
  source.addEventListener("overflow", () => handlers.resync?.());
  const listen = <K extends Kind>(kind: K, decoder: Decoder<Parameters<NonNullable<Handlers[K]>>[0]>) => {
    const handler = handlers[kind] as ((e: unknown) => void) | undefined;
    if (!handler) return;
    source.addEventListener(kind, (message) => {
      try {
        handler(decode(decoder, JSON.parse((message as MessageEvent<string>).data), kind));
      } catch (e) {
        console.warn("ignored a malformed live event", kind, e);
      }
    });
  };
  listen("experiment", decoders.experiment);
  listen("trial", decoders.trial);
  listen("metrics", decoders.metrics);
  listen("logs", decoders.logs);
  return { close: () => source.close() };
}
