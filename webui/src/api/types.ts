// The master's JSON shapes (the API's messages in protobuf's JSON mapping: lowerCamelCase keys) and
// their decoders. Times are seconds since the epoch; JSON-in-a-string fields are parsed here.

import {
  anyObject,
  array,
  bool,
  type Decoder,
  DecodeError,
  int,
  jsonText,
  map,
  nullable,
  num,
  object,
  optional,
  record,
  str,
  time,
  unknownValue,
} from "./decode";

export const STATES = [
  "UNSPECIFIED",
  "ACTIVE",
  "PAUSED",
  "STOPPING_COMPLETED",
  "STOPPING_CANCELED",
  "STOPPING_ERROR",
  "COMPLETED",
  "CANCELED",
  "ERROR",
  "DELETED",
  "DELETING",
  "DELETE_FAILED",
  "STOPPING_KILLED",
  "QUEUED",
  "PULLING",
  "STARTING",
  "RUNNING",
] as const;
export type State = (typeof STATES)[number];

export const TERMINAL_STATES: readonly State[] = ["COMPLETED", "CANCELED", "ERROR", "DELETED"];

/** The states the master shows for a running experiment or trial (stored as ACTIVE): what its
 * allocations are doing, as Determined reports it. */
export const ACTIVE_STATES: readonly State[] = ["ACTIVE", "QUEUED", "PULLING", "STARTING", "RUNNING"];

export const isActive = (s: State): boolean => ACTIVE_STATES.includes(s);

/** "STATE_ACTIVE" (the API) or "ACTIVE" (live events) to "ACTIVE". */
export const state: Decoder<State> = (value) => {
  const name = str(value).replace(/^STATE_/, "");
  if (!(STATES as readonly string[]).includes(name)) throw new DecodeError(`unknown state ${JSON.stringify(name)}`);
  return name as State;
};

/** What a trial is doing (the master's trial lifecycle); its `state` follows from it. */
export const TRIAL_PHASES = [
  "UNSPECIFIED",
  "QUEUED",
  "STARTING",
  "RUNNING",
  "REPORTED",
  "PROMOTED",
  "CLOSING",
  "STOPPING",
  "EARLY_STOPPING",
  "KILLING",
  "AWAITING_VERDICT",
  "PAUSED",
  "PAUSED_AWAITING_VERDICT",
  "COMPLETED",
  "CANCELED",
  "ERRORED",
] as const;
export type TrialPhase = (typeof TRIAL_PHASES)[number];

/** "TRIAL_PHASE_RUNNING" (the API) to "RUNNING". */
export const trialPhase: Decoder<TrialPhase> = (value) => {
  const name = str(value).replace(/^TRIAL_PHASE_/, "");
  if (!(TRIAL_PHASES as readonly string[]).includes(name)) throw new DecodeError(`unknown trial phase ${JSON.stringify(name)}`);
  return name as TrialPhase;
};

export type JsonObject = Record<string, unknown>;
const jsonObject: Decoder<JsonObject> = anyObject;

export interface Experiment {
  id: number;
  name: string;
  description: string;
  labels: string[];
  state: State;
  startTime: number;
  endTime: number | null;
  username: string;
  archived: boolean;
  progress: number;
  numTrials: number;
  resourcePool: string;
  jobId: string;
  searcherType: string;
  searcherMetric: string;
  smallerIsBetter: boolean;
  bestTrialSearcherMetric: number | null;
  /** The experiment it was forked from. */
  forkedFrom: number | null;
  // Reported into by a script off the cluster (core_v2 outside a trial).
  unmanaged: boolean;
  /** The config text as submitted (only in GetExperiment's answer). */
  originalConfig: string;
}

export const experiment: Decoder<Experiment> = object<Experiment>({
  id: int,
  name: str,
  description: str,
  labels: array(str),
  state,
  startTime: time,
  endTime: nullable(time),
  username: str,
  archived: bool,
  progress: map(nullable(num), (p) => p ?? 0),
  numTrials: int,
  resourcePool: str,
  jobId: str,
  searcherType: str,
  searcherMetric: str,
  smallerIsBetter: optional(bool, true),
  bestTrialSearcherMetric: nullable(num),
  forkedFrom: nullable(int),
  unmanaged: optional(bool, false),
  originalConfig: optional(str, ""),
});

/** How a list was cut (Determined's Pagination): `total` is how many there are in all. */
export interface Pagination {
  total: number;
}
const pagination: Decoder<Pagination> = object<Pagination>({ total: int });

export interface ExperimentList {
  experiments: Experiment[];
  total: number;
}
export const experimentList: Decoder<ExperimentList> = map(
  object({ experiments: array(experiment), pagination }),
  (r) => ({ experiments: r.experiments, total: r.pagination.total }),
);

/** A trial of searcher.source_experiment_id that seeded a warm-started search (never run). */
export interface ImportedTrial {
  sourceExperimentId: number;
  sourceTrialId: number;
  hparams: JsonObject;
  latestValidation: JsonObject;
  bestValidationMetric: number | null;
  stepsCompleted: number;
  /** Why the search did not use it ("" when it did). */
  note: string;
}
export const importedTrial: Decoder<ImportedTrial> = object<ImportedTrial>({
  sourceExperimentId: int,
  sourceTrialId: int,
  hparams: map(nullable(jsonObject), (o) => o ?? {}),
  latestValidation: map(nullable(jsonObject), (o) => o ?? {}),
  bestValidationMetric: nullable(num),
  stepsCompleted: int,
  note: optional(str, ""),
});

export interface ExperimentDetail {
  experiment: Experiment;
  /** The filled-in config. */
  config: JsonObject;
  /** The config text exactly as submitted (YAML or JSON). */
  originalConfig: string;
  importedTrials: ImportedTrial[];
  /** Trial ids on a multi-objective search's Pareto front. */
  paretoFront: number[];
}
export const experimentDetail: Decoder<ExperimentDetail> = map(
  object({
    experiment,
    config: map(nullable(jsonObject), (o) => o ?? {}),
    importedTrials: optional(array(importedTrial), []),
    paretoFront: optional(array(int), []),
  }),
  (r) => ({
    experiment: r.experiment,
    config: r.config,
    originalConfig: r.experiment.originalConfig,
    importedTrials: r.importedTrials,
    paretoFront: r.paretoFront,
  }),
);

export const experimentAction: Decoder<{ experiment: Experiment | null }> = object({
  experiment: nullable(experiment),
});

export interface Trial {
  id: number;
  experimentId: number;
  state: State;
  hparams: JsonObject;
  seed: number;
  restarts: number;
  runId: number;
  totalBatchesProcessed: number;
  startTime: number;
  endTime: number | null;
  latestCheckpointUuid: string | null;
  bestValidationMetric: number | null;
  /** The metrics of its latest validation (the API's latestValidation.metrics.avgMetrics). */
  latestValidation: JsonObject;
  taskId: string;
  searcherLength: number;
  progress: number;
  earlyExit: string;
  phase: TrialPhase;
  /** The checkpoint it started from (searcher.source_trial_id / source_checkpoint_uuid). */
  warmStartCheckpointUuid: string | null;
  /** The trial whose checkpoint it started from (a PBT child's parent). */
  parentTrialId: number | null;
}

/** An object the API may leave null (an unset Struct): {} then. */
const objectOrEmpty: Decoder<JsonObject> = map(nullable(jsonObject), (o) => o ?? {});

/** A MetricsWorkload's metrics (Determined's {metrics: {avgMetrics}}); {} when unset. */
const workloadMetrics: Decoder<JsonObject> = map(
  nullable(object({ metrics: nullable(object({ avgMetrics: objectOrEmpty })) })),
  (w) => w?.metrics?.avgMetrics ?? {},
);

export const trial: Decoder<Trial> = object<Trial>({
  id: int,
  experimentId: int,
  state,
  hparams: objectOrEmpty,
  seed: int,
  restarts: int,
  runId: int,
  totalBatchesProcessed: int,
  startTime: time,
  endTime: nullable(time),
  latestCheckpointUuid: nullable(str),
  bestValidationMetric: nullable(num),
  latestValidation: workloadMetrics,
  taskId: str,
  searcherLength: int,
  progress: num,
  earlyExit: str,
  phase: trialPhase,
  warmStartCheckpointUuid: map(optional(nullable(str), null), (u) => u || null),
  parentTrialId: optional(nullable(int), null),
});
export const trialList: Decoder<Trial[]> = map(object({ trials: array(trial), pagination }), (r) => r.trials);
export const trialOne: Decoder<Trial> = map(object({ trial }), (r) => r.trial);

export interface MetricReport {
  group: string;
  stepsCompleted: number;
  metrics: JsonObject;
  timestamp: number;
}
export const metricReport: Decoder<MetricReport> = object<MetricReport>({
  group: str,
  stepsCompleted: int,
  metrics: jsonText(jsonObject, {}),
  timestamp: num,
});
export const metricReports: Decoder<MetricReport[]> = array(metricReport);

/** A checkpoint (the API's Determined-shaped one, its training metadata flattened here). */
export interface Checkpoint {
  uuid: string;
  trialId: number;
  experimentId: number;
  stepsCompleted: number;
  metadata: JsonObject;
  resources: Record<string, number>;
  size: number;
  /** COMPLETED, DELETED, ... */
  state: string;
  reportTime: number;
  searcherMetric: number | null;
}
export const checkpoint: Decoder<Checkpoint> = map(
  object({
    uuid: str,
    training: nullable(
      object({
        trialId: optional(nullable(int), null),
        experimentId: optional(nullable(int), null),
        searcherMetric: optional(nullable(num), null),
      }),
    ),
    stepsCompleted: int,
    metadata: objectOrEmpty,
    resources: record(int),
    size: int,
    state: str,
    reportTime: time,
  }),
  (c) => ({
    uuid: c.uuid,
    trialId: c.training?.trialId ?? 0,
    experimentId: c.training?.experimentId ?? 0,
    stepsCompleted: c.stepsCompleted,
    metadata: c.metadata,
    resources: c.resources,
    size: c.size,
    state: c.state.replace(/^STATE_/, ""),
    reportTime: c.reportTime,
    searcherMetric: c.training?.searcherMetric ?? null,
  }),
);
export const checkpointList: Decoder<Checkpoint[]> = map(
  object({ checkpoints: array(checkpoint), pagination }),
  (r) => r.checkpoints,
);

/** A log line (Determined's TrialLogsResponse). */
export interface TaskLog {
  id: number;
  rankId: number | null;
  /** DEBUG, INFO, ... ("" when the line named none). */
  level: string;
  stdtype: string;
  timestamp: number;
  message: string;
  agentId: string;
}
export const taskLog: Decoder<TaskLog> = object<TaskLog>({
  id: int,
  rankId: optional(nullable(int), null),
  level: map(str, (l) => (l === "LOG_LEVEL_UNSPECIFIED" ? "" : l.replace(/^LOG_LEVEL_/, ""))),
  stdtype: map(optional(nullable(str), null), (s) => s ?? ""),
  timestamp: time,
  message: str,
  agentId: map(optional(nullable(str), null), (a) => a ?? ""),
});
/** One line of a streamed answer: `{"result": ...}`, or `{"error": ...}` when the stream failed. */
interface StreamLine {
  result: unknown;
  error: { error: string } | null;
}
const streamLineShape: Decoder<StreamLine> = object<StreamLine>({
  result: unknownValue,
  error: optional(nullable(object<{ error: string }>({ error: optional(str, "") })), null),
});
export const streamLine =
  <T>(decoder: Decoder<T>): Decoder<T> =>
  (value) => {
    const line = streamLineShape(value);
    if (line.error) throw new DecodeError(`the stream failed: ${line.error.error}`);
    return decoder(line.result);
  };

/** A slot as the cluster page shows it (from Determined's Slot and its Device). */
export interface Slot {
  id: string;
  /** cpu, cuda */
  type: string;
  /** The device's name ("cpu" for an artificial slot). */
  device: string;
  enabled: boolean;
  allocationId: string;
}
const slot: Decoder<Slot> = map(
  object({
    id: str,
    device: nullable(object({ brand: optional(str, ""), type: optional(str, "TYPE_UNSPECIFIED") })),
    enabled: bool,
    allocationId: optional(str, ""),
  }),
  (s) => ({
    id: s.id,
    type: (s.device?.type ?? "").replace(/^TYPE_/, "").toLowerCase(),
    device: s.device?.brand ?? "",
    enabled: s.enabled,
    allocationId: s.allocationId,
  }),
);
/** An agent (Determined's Agent: slots by id, its pools and addresses as lists). */
export interface Agent {
  id: string;
  address: string;
  slots: Slot[];
  resourcePool: string;
  registeredTime: number;
  enabled: boolean;
  draining: boolean;
  connected: boolean;
  runtime: string;
  version: string;
  // What is wrong with the agent's setup (a clock off the master's, an unreachable address).
  problems: string[];
}
export const agent: Decoder<Agent> = map(
  object({
    id: str,
    addresses: optional(array(str), []),
    slots: optional(record(slot), {}),
    resourcePools: optional(array(str), []),
    registeredTime: nullable(time),
    enabled: bool,
    draining: bool,
    connected: optional(bool, true),
    runtime: optional(str, ""),
    version: str,
    problems: optional(array(str), []),
  }),
  (a) => ({
    id: a.id,
    address: a.addresses.join(", "),
    slots: Object.values(a.slots),
    resourcePool: a.resourcePools.join(", "),
    registeredTime: a.registeredTime ?? 0,
    enabled: a.enabled,
    draining: a.draining,
    connected: a.connected,
    runtime: a.runtime,
    version: a.version,
    problems: a.problems,
  }),
);
export const agentList: Decoder<Agent[]> = map(object({ agents: array(agent) }), (r) => r.agents);

// An instance an elastic pool's provisioner launched (resource_pools[].provider).
export interface Instance {
  id: string;
  resourcePool: string;
  // launching, starting agent, running, idle, terminating or stopped
  state: string;
  launchedAt: number;
  agentId: string;
  idleSince: number; // 0 while busy or not connected
}
export const instance: Decoder<Instance> = object<Instance>({
  id: str,
  resourcePool: optional(str, ""),
  state: optional(str, ""),
  launchedAt: map(optional(nullable(time), null), (t) => t ?? 0),
  agentId: optional(str, ""),
  idleSince: map(optional(nullable(time), null), (t) => t ?? 0),
});
export interface Provisioner {
  resourcePool: string;
  provider: string;
  minInstances: number;
  maxInstances: number;
  error: string; // the provider's last error while it keeps failing
  lastDecision: string;
}
export const provisioner: Decoder<Provisioner> = object<Provisioner>({
  resourcePool: str,
  provider: optional(str, ""),
  minInstances: optional(int, 0),
  maxInstances: optional(int, 0),
  error: optional(str, ""),
  lastDecision: optional(str, ""),
});
// GET /api/v1/agents: the agents, and the elastic pools' instances and provisioning.
export interface Cluster {
  agents: Agent[];
  instances: Instance[];
  provisioners: Provisioner[];
}
export const cluster: Decoder<Cluster> = object<Cluster>({
  agents: array(agent),
  instances: optional(array(instance), []),
  provisioners: optional(array(provisioner), []),
});

/** A resource pool as the pages show it (from Determined's ResourcePool). */
export interface ResourcePool {
  name: string;
  description: string;
  /** priority, fair_share, slurm */
  scheduler: string;
  /** best, worst */
  fittingPolicy: string;
  preemption: boolean;
  numAgents: number;
  slotsTotal: number;
  slotsUsed: number;
  isDefault: boolean;
}
export const resourcePool: Decoder<ResourcePool> = map(
  object({
    name: str,
    description: str,
    numAgents: int,
    slotsAvailable: int,
    slotsUsed: int,
    defaultComputePool: bool,
    schedulerType: str,
    schedulerFittingPolicy: str,
    details: nullable(object({ priorityScheduler: nullable(object({ preemption: bool })) })),
  }),
  (p) => ({
    name: p.name,
    description: p.description,
    scheduler: p.schedulerType.replace(/^SCHEDULER_TYPE_/, "").toLowerCase(),
    fittingPolicy: p.schedulerFittingPolicy.replace(/^FITTING_POLICY_/, "").toLowerCase(),
    preemption: p.details?.priorityScheduler?.preemption ?? false,
    numAgents: p.numAgents,
    slotsTotal: p.slotsAvailable,
    slotsUsed: p.slotsUsed,
    isDefault: p.defaultComputePool,
  }),
);
export const resourcePoolList: Decoder<ResourcePool[]> = map(
  object({ resourcePools: array(resourcePool), pagination }),
  (r) => r.resourcePools,
);

/** A job in the queue (from Determined's Job). */
export interface Job {
  jobId: string;
  /** TYPE_EXPERIMENT */
  type: string;
  name: string;
  priority: number;
  weight: number;
  submissionTime: number;
  acquiredSlots: number;
  neededSlots: number;
  /** STATE_QUEUED or STATE_SCHEDULED */
  state: string;
  username: string;
  resourcePool: string;
  /** The experiment's id. */
  entityId: number;
}
export const job: Decoder<Job> = map(
  object({
    jobId: str,
    type: str,
    name: str,
    priority: int,
    weight: num,
    submissionTime: time,
    allocatedSlots: int,
    requestedSlots: int,
    summary: nullable(object({ state: str })),
    username: str,
    resourcePool: str,
    entityId: int,
  }),
  (j) => ({
    jobId: j.jobId,
    type: j.type,
    name: j.name,
    priority: j.priority,
    weight: j.weight,
    submissionTime: j.submissionTime,
    acquiredSlots: j.allocatedSlots,
    neededSlots: j.requestedSlots,
    state: j.summary?.state ?? "",
    username: j.username,
    resourcePool: j.resourcePool,
    entityId: j.entityId,
  }),
);
export const jobList: Decoder<Job[]> = map(object({ jobs: array(job), pagination }), (r) => r.jobs);

/** One change to the queue, as `det job update` takes it. */
export interface JobUpdate {
  jobId: string;
  priority?: number;
  weight?: number;
  resourcePool?: string;
  aheadOf?: string;
  behindOf?: string;
}

export const created: Decoder<{ experiment: Experiment }> = object({ experiment });

/** An error as the master answers it (Determined's {"error": {code, reason, error}}): its
 * message. */
export const errorBody: Decoder<{ error: string }> = map(
  object({ error: object({ error: str }) }),
  (e) => ({ error: e.error.error }),
);

/** A user of the cluster, as login and /api/v1/me answer. */
export interface User {
  id: number;
  username: string;
  admin: boolean;
  active: boolean;
}
export const user: Decoder<User> = object<User>({ id: int, username: str, admin: bool, active: bool });
/** Login's answer (Determined's LoginResponse; a browser's token is the cookie, not this). */
export const loginAnswer: Decoder<User> = map(object({ user }), (r) => r.user);
/** /api/v1/me's answer (Determined's GetMeResponse). */
export const meAnswer: Decoder<User> = loginAnswer;

/** The master (GetMaster), with the cluster-wide message an admin set, if one is shown now. */
export interface MasterInfo {
  version: string;
  clusterMessage: { message: string } | null;
}
export const masterInfo: Decoder<MasterInfo> = object<MasterInfo>({
  version: str,
  clusterMessage: optional(nullable(object<{ message: string }>({ message: str })), null),
});

/** A TensorBoard task (`det tensorboard`); `serviceAddress` is its path on the master. */
export interface Tensorboard {
  id: string;
  description: string;
  state: string;
  startTime: number;
  resourcePool: string;
  username: string;
  experimentIds: number[];
  trialIds: number[];
  serviceAddress: string;
  exitStatus: string;
}
export const tensorboard: Decoder<Tensorboard> = object<Tensorboard>({
  id: str,
  description: optional(str, ""),
  state: str,
  startTime: optional(time, 0),
  resourcePool: optional(str, ""),
  username: str,
  experimentIds: optional(array(int), []),
  trialIds: optional(array(int), []),
  serviceAddress: str,
  exitStatus: optional(str, ""),
});
export const tensorboardOne: Decoder<{ tensorboard: Tensorboard }> = object({ tensorboard });
export const tensorboardList: Decoder<{ tensorboards: Tensorboard[] }> = object({
  tensorboards: optional(array(tensorboard), []),
});

/** A command, notebook or shell (`det cmd|notebook|shell`), as the master lists them. */
export interface InteractiveTask {
  id: string;
  description: string;
  state: string;
  startTime: number;
  username: string;
  resourcePool: string;
  exitStatus: string;
  slots: number;
  priority: number;
  /** "/proxy/<id>/" for a notebook (where it is opened); "" for the others. */
  serviceAddress: string;
}
export const interactiveTask: Decoder<InteractiveTask> = object<InteractiveTask>({
  id: str,
  description: optional(str, ""),
  state: str,
  startTime: optional(time, 0),
  username: str,
  resourcePool: optional(str, ""),
  exitStatus: optional(str, ""),
  slots: optional(int, 0),
  priority: optional(int, 42),
  serviceAddress: optional(str, ""),
});
export const commandList: Decoder<InteractiveTask[]> = map(
  object({ commands: optional(array(interactiveTask), []) }),
  (r) => r.commands,
);
export const notebookList: Decoder<InteractiveTask[]> = map(
  object({ notebooks: optional(array(interactiveTask), []) }),
  (r) => r.notebooks,
);
export const shellList: Decoder<InteractiveTask[]> = map(
  object({ shells: optional(array(interactiveTask), []) }),
  (r) => r.shells,
);
export const notebookOne: Decoder<{ notebook: InteractiveTask }> = object({ notebook: interactiveTask });
