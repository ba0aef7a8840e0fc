// The master's JSON shapes (the API's messages with snake_case keys) and their decoders.
// Times are seconds since the epoch; JSON-in-a-string fields are parsed here.

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
  start_time: number;
  end_time: number | null;
  username: string;
  archived: boolean;
  progress: number;
  num_trials: number;
  resource_pool: string;
  job_id: string;
  searcher_name: string;
  searcher_metric: string;
  smaller_is_better: boolean;
  best_searcher_metric: number | null;
  parent_id: number;
  // Reported into by a script off the cluster (core_v2 outside a trial).
  unmanaged: boolean;
}

export const experiment: Decoder<Experiment> = object<Experiment>({
  id: int,
  name: str,
  description: str,
  labels: array(str),
  state,
  start_time: num,
  end_time: nullable(num),
  username: str,
  archived: bool,
  progress: num,
  num_trials: int,
  resource_pool: str,
  job_id: str,
  searcher_name: str,
  searcher_metric: str,
  smaller_is_better: bool,
  best_searcher_metric: nullable(num),
  parent_id: int,
  unmanaged: optional(bool, false),
});

export interface ExperimentList {
  experiments: Experiment[];
  total: number;
}
export const experimentList: Decoder<ExperimentList> = object<ExperimentList>({
  experiments: array(experiment),
  total: int,
});

/** A trial of searcher.source_experiment_id that seeded a warm-started search (never run). */
export interface ImportedTrial {
  source_experiment_id: number;
  source_trial_id: number;
  hparams: JsonObject;
  latest_validation: JsonObject;
  best_validation_metric: number | null;
  steps_completed: number;
  /** Why the search did not use it ("" when it did). */
  note: string;
}
export const importedTrial: Decoder<ImportedTrial> = object<ImportedTrial>({
  source_experiment_id: int,
  source_trial_id: int,
  hparams: jsonText(jsonObject, {}),
  latest_validation: jsonText(jsonObject, {}),
  best_validation_metric: nullable(num),
  steps_completed: int,
  note: optional(str, ""),
});

export interface ExperimentDetail {
  experiment: Experiment;
  /** The filled-in config. */
  config: JsonObject;
  /** The config text exactly as submitted (YAML or JSON). */
  original_config: string;
  imported_trials: ImportedTrial[];
  /** Trial ids on a multi-objective search's Pareto front. */
  pareto_front: number[];
}
export const experimentDetail: Decoder<ExperimentDetail> = object<ExperimentDetail>({
  experiment,
  config: jsonText(jsonObject, {}),
  original_config: str,
  imported_trials: optional(array(importedTrial), []),
  pareto_front: optional(array(int), []),
});

export const experimentAction: Decoder<{ experiment: Experiment | null }> = object({
  experiment: nullable(experiment),
});

export interface Trial {
  id: number;
  experiment_id: number;
  state: State;
  hparams: JsonObject;
  seed: number;
  restarts: number;
  run_id: number;
  steps_completed: number;
  start_time: number;
  end_time: number | null;
  latest_checkpoint_uuid: string | null;
  best_validation_metric: number | null;
  latest_validation: JsonObject;
  task_id: string;
  searcher_length: number;
  progress: number;
  early_exit: string;
  phase: TrialPhase;
  /** The checkpoint it started from (searcher.source_trial_id / source_checkpoint_uuid). */
  warm_start_checkpoint_uuid: string | null;
  /** The trial whose checkpoint it started from (a PBT child's parent). */
  parent_trial_id: number | null;
}

export const trial: Decoder<Trial> = object<Trial>({
  id: int,
  experiment_id: int,
  state,
  hparams: jsonText(jsonObject, {}),
  seed: int,
  restarts: int,
  run_id: int,
  steps_completed: int,
  start_time: num,
  end_time: nullable(num),
  latest_checkpoint_uuid: nullable(str),
  best_validation_metric: nullable(num),
  latest_validation: jsonText(jsonObject, {}),
  task_id: str,
  searcher_length: int,
  progress: num,
  early_exit: str,
  phase: trialPhase,
  warm_start_checkpoint_uuid: optional(nullable(str), null),
  parent_trial_id: optional(nullable(int), null),
});
export const trialList: Decoder<Trial[]> = map(object({ trials: array(trial) }), (r) => r.trials);
export const trialOne: Decoder<Trial> = map(object({ trial }), (r) => r.trial);

export interface MetricReport {
  group: string;
  steps_completed: number;
  metrics: JsonObject;
  timestamp: number;
}
export const metricReport: Decoder<MetricReport> = object<MetricReport>({
  group: str,
  steps_completed: int,
  metrics: jsonText(jsonObject, {}),
  timestamp: num,
});
export const metricReports: Decoder<MetricReport[]> = array(metricReport);

export interface Checkpoint {
  uuid: string;
  trial_id: number;
  experiment_id: number;
  steps_completed: number;
  metadata: JsonObject;
  resources: Record<string, number>;
  size: number;
  state: string;
  report_time: number;
  searcher_metric: number | null;
}
export const checkpoint: Decoder<Checkpoint> = object<Checkpoint>({
  uuid: str,
  trial_id: int,
  experiment_id: int,
  steps_completed: int,
  metadata: jsonText(jsonObject, {}),
  resources: record(int),
  size: int,
  state: str,
  report_time: num,
  searcher_metric: optional(nullable(num), null),
});
export const checkpointList: Decoder<Checkpoint[]> = map(
  object({ checkpoints: array(checkpoint) }),
  (r) => r.checkpoints,
);

export interface TaskLog {
  id: number;
  rank: number | null;
  level: string;
  stdtype: string;
  timestamp: number;
  message: string;
  agent_id: string;
}
export const taskLog: Decoder<TaskLog> = object<TaskLog>({
  id: int,
  rank: nullable(int),
  level: str,
  stdtype: str,
  timestamp: num,
  message: str,
  agent_id: str,
});
export const taskLogs: Decoder<TaskLog[]> = array(taskLog);

export interface Slot {
  id: string;
  type: string;
  device: string;
  enabled: boolean;
  allocation_id: string;
}
export interface Agent {
  id: string;
  address: string;
  slots: Slot[];
  resource_pool: string;
  registered_time: number;
  enabled: boolean;
  draining: boolean;
  connected: boolean;
  runtime: string;
  version: string;
  // What is wrong with the agent's setup (a clock off the master's, an unreachable address).
  problems: string[];
}
export const agent: Decoder<Agent> = object<Agent>({
  id: str,
  address: str,
  slots: array(
    object<Slot>({ id: str, type: str, device: str, enabled: bool, allocation_id: str }),
  ),
  resource_pool: str,
  registered_time: num,
  enabled: bool,
  draining: bool,
  connected: bool,
  runtime: str,
  version: str,
  problems: optional(array(str), []),
});
export const agentList: Decoder<Agent[]> = map(object({ agents: array(agent) }), (r) => r.agents);

// An instance an elastic pool's provisioner launched (resource_pools[].provider).
export interface Instance {
  id: string;
  resource_pool: string;
  // launching, starting agent, running, idle, terminating or stopped
  state: string;
  launched_at: number;
  agent_id: string;
  idle_since: number; // 0 while busy or not connected
}
export const instance: Decoder<Instance> = object<Instance>({
  id: str,
  resource_pool: optional(str, ""),
  state: optional(str, ""),
  launched_at: optional(num, 0),
  agent_id: optional(str, ""),
  idle_since: optional(num, 0),
});
export interface Provisioner {
  resource_pool: string;
  provider: string;
  min_instances: number;
  max_instances: number;
  error: string; // the provider's last error while it keeps failing
  last_decision: string;
}
export const provisioner: Decoder<Provisioner> = object<Provisioner>({
  resource_pool: str,
  provider: optional(str, ""),
  min_instances: optional(int, 0),
  max_instances: optional(int, 0),
  error: optional(str, ""),
  last_decision: optional(str, ""),
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

export interface ResourcePool {
  name: string;
  description: string;
  scheduler: string;
  fitting_policy: string;
  preemption: boolean;
  num_agents: number;
  slots_total: number;
  slots_used: number;
  is_default: boolean;
}
export const resourcePool: Decoder<ResourcePool> = object<ResourcePool>({
  name: str,
  description: str,
  scheduler: str,
  fitting_policy: str,
  preemption: bool,
  num_agents: int,
  slots_total: int,
  slots_used: int,
  is_default: bool,
});
export const resourcePoolList: Decoder<ResourcePool[]> = map(
  object({ pools: array(resourcePool) }),
  (r) => r.pools,
);

export interface Job {
  job_id: string;
  type: string;
  name: string;
  priority: number;
  weight: number;
  submission_time: number;
  acquired_slots: number;
  needed_slots: number;
  state: string;
  username: string;
  resource_pool: string;
  entity_id: number;
}
export const job: Decoder<Job> = object<Job>({
  job_id: str,
  type: str,
  name: str,
  priority: int,
  weight: num,
  submission_time: num,
  acquired_slots: int,
  needed_slots: int,
  state: str,
  username: str,
  resource_pool: str,
  entity_id: int,
});
export const jobList: Decoder<Job[]> = map(object({ jobs: array(job) }), (r) => r.jobs);

/** One change to the queue, as `det job update` takes it. */
export interface JobUpdate {
  job_id: string;
  priority?: number;
  weight?: number;
  resource_pool?: string;
  ahead_of?: string;
  behind_of?: string;
}

export const created: Decoder<{ experiment: Experiment }> = object({ experiment });

export const errorBody: Decoder<{ error: string }> = object({ error: str });

/** A user of the cluster, as login and /api/v1/me answer. */
export interface User {
  id: number;
  username: string;
  admin: boolean;
  active: boolean;
}
export const user: Decoder<User> = object<User>({ id: int, username: str, admin: bool, active: bool });

/** The master (GetMaster), with the cluster-wide message an admin set, if one is shown now. */
export interface MasterInfo {
  version: string;
  cluster_message: { message: string } | null;
}
export const masterInfo: Decoder<MasterInfo> = object<MasterInfo>({
  version: str,
  cluster_message: optional(nullable(object<{ message: string }>({ message: str })), null),
});

/** A TensorBoard task (`det tensorboard`); `service_address` is its path on the master. */
export interface Tensorboard {
  id: string;
  description: string;
  state: string;
  start_time: number;
  resource_pool: string;
  username: string;
  experiment_ids: number[];
  trial_ids: number[];
  service_address: string;
  exit_status: string;
}
export const tensorboard: Decoder<Tensorboard> = object<Tensorboard>({
  id: str,
  description: optional(str, ""),
  state: str,
  start_time: optional(num, 0),
  resource_pool: optional(str, ""),
  username: str,
  experiment_ids: optional(array(int), []),
  trial_ids: optional(array(int), []),
  service_address: str,
  exit_status: optional(str, ""),
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
  start_time: number;
  username: string;
  resource_pool: string;
  exit_status: string;
  slots: number;
  priority: number;
  /** "/proxy/<id>/" for a notebook (where it is opened); "" for the others. */
  service_address: string;
}
export const interactiveTask: Decoder<InteractiveTask> = object<InteractiveTask>({
  id: str,
  description: optional(str, ""),
  state: str,
  start_time: optional(num, 0),
  username: str,
  resource_pool: optional(str, ""),
  exit_status: optional(str, ""),
  slots: optional(int, 0),
  priority: optional(int, 42),
  service_address: optional(str, ""),
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
