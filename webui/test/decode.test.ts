import { describe, expect, it } from "vitest";
import { anyObject, array, decode, DecodeError, int, jsonText, nullable, num, object, str } from "../src/api/decode";
import * as t from "../src/api/types";
import { decoders } from "../src/api/stream";

// Shapes exactly as the master writes them (betterproto to_dict, snake_case, defaults included).
const EXPERIMENT = {
  id: 3,
  name: "mnist",
  description: "",
  labels: ["a"],
  state: "STATE_ACTIVE",
  start_time: 1795309909.8,
  end_time: null,
  username: "determined",
  archived: false,
  progress: 0.25,
  num_trials: 2,
  resource_pool: "default",
  job_id: "294e786a",
  searcher_name: "single",
  searcher_metric: "loss",
  smaller_is_better: true,
  best_searcher_metric: null,
  parent_id: 0,
  project: "",
  workspace: "",
};

const TRIAL = {
  id: 1,
  experiment_id: 3,
  state: "STATE_COMPLETED",
  hparams: '{"lr": 0.1, "opt": {"name": "sgd"}}',
  seed: "2145849415",
  restarts: 0,
  run_id: 1,
  steps_completed: "120",
  start_time: 1.5,
  end_time: 2.5,
  latest_checkpoint_uuid: null,
  best_validation_metric: 0.5,
  latest_validation: "{}",
  task_id: "3.1",
  searcher_length: "5",
  progress: 0.0,
  early_exit: "",
  phase: "TRIAL_PHASE_COMPLETED",
};

describe("primitive decoders", () => {
  it("reads 64-bit integers written as strings", () => {
    expect(int("2145849415")).toBe(2145849415);
    expect(int(7)).toBe(7);
    expect(() => int("7.5")).toThrow(DecodeError);
    expect(() => int(1.5)).toThrow(/expected an integer/);
  });

  it("reads non-finite doubles as proto3 JSON writes them", () => {
    expect(num("NaN")).toBeNaN();
    expect(num("-Infinity")).toBe(-Infinity);
    expect(() => num("1")).toThrow(DecodeError);
  });

  it("names the path of a wrong field", () => {
    const d = object({ items: array(object({ name: str })) });
    expect(() => d({ items: [{ name: "a" }, { name: 3 }] })).toThrow("items[1].name: expected a string, got number");
  });

  it("treats null and absent as null for nullable fields", () => {
    const d = object({ v: nullable(num) });
    expect(d({ v: null })).toEqual({ v: null });
    expect(d({})).toEqual({ v: null });
  });

  it("parses JSON carried in strings, empty meaning the default", () => {
    const d = jsonText(anyObject, {});
    expect(d('{"a": 1}')).toEqual({ a: 1 });
    expect(d("")).toEqual({});
    expect(() => d("{oops")).toThrow(/JSON/);
    expect(() => d("[1]")).toThrow(/expected an object/);
  });

  it("reads the NaN and Infinity that Python's json module writes, but not inside strings", () => {
    const d = jsonText(anyObject, {});
    const parsed = d('{"loss": NaN, "hi": Infinity, "lo": -Infinity, "note": "NaN, Infinity", "x": 1}');
    expect(parsed.loss).toBeNaN();
    expect(parsed.hi).toBe(Infinity);
    expect(parsed.lo).toBe(-Infinity);
    expect(parsed.note).toBe("NaN, Infinity");
    expect(parsed.x).toBe(1);
    expect(d('{"q": "say \\"NaN\\"", "v": [NaN, 2]}')).toEqual({ q: 'say "NaN"', v: [NaN, 2] });
    expect(() => d("{NaNa}")).toThrow(/JSON/);
  });
});

describe("API decoders", () => {
  it("decodes an experiment list and strips the STATE_ prefix", () => {
    const list = t.experimentList({ experiments: [EXPERIMENT], total: 10000 });
    expect(list.total).toBe(10000);
    expect(list.experiments[0]?.state).toBe("ACTIVE");
    expect(list.experiments[0]?.best_searcher_metric).toBeNull();
  });

  it("rejects an unknown state", () => {
    expect(() => decode(t.experimentList, { experiments: [{ ...EXPERIMENT, state: "STATE_NAPPING" }], total: 1 })).toThrow(
      'experiments[0].state: unknown state "NAPPING"',
    );
  });

  it("decodes a trial with parsed hyperparameters and integer strings", () => {
    const trial = t.trialOne({ trial: TRIAL });
    expect(trial.hparams).toEqual({ lr: 0.1, opt: { name: "sgd" } });
    expect(trial.steps_completed).toBe(120);
    expect(trial.seed).toBe(2145849415);
    expect(trial.state).toBe("COMPLETED");
    expect(trial.phase).toBe("COMPLETED");
  });

  it("decodes a PBT child's parent, absent for other trials", () => {
    expect(t.trialOne({ trial: TRIAL }).parent_trial_id).toBeNull();
    expect(t.trialOne({ trial: { ...TRIAL, parent_trial_id: 7 } }).parent_trial_id).toBe(7);
    expect(() => t.trialOne({ trial: { ...TRIAL, parent_trial_id: "x" } })).toThrow(/trial\.parent_trial_id/);
  });

  it("decodes every trial phase and rejects an unknown one", () => {
    expect(t.trialOne({ trial: { ...TRIAL, phase: "TRIAL_PHASE_AWAITING_VERDICT" } }).phase).toBe("AWAITING_VERDICT");
    expect(() => t.trialOne({ trial: { ...TRIAL, phase: "TRIAL_PHASE_NAPPING" } })).toThrow(
      'trial.phase: unknown trial phase "NAPPING"',
    );
  });

  it("decodes the experiment detail's config JSON", () => {
    const d = t.experimentDetail(
      { experiment: EXPERIMENT, config: '{"searcher": {"name": "single"}}', original_config: "name: x\n" },
    );
    expect(d.config).toEqual({ searcher: { name: "single" } });
    expect(d.original_config).toBe("name: x\n");
  });

  it("decodes metric reports", () => {
    const reports = t.metricReports(
      [{ group: "training", steps_completed: "5", metrics: '{"loss": 0.5}', timestamp: 3.0, batch_metrics: "" }],
    );
    expect(reports).toEqual([{ group: "training", steps_completed: 5, metrics: { loss: 0.5 }, timestamp: 3 }]);
  });

  it("decodes logs with and without a rank", () => {
    const line = { id: "7", task_id: "1.1", allocation_id: "a", trial_id: 1, rank: null, level: "INFO", stdtype: "stdout", timestamp: 1, message: "hi", agent_id: "agent-0", container_id: "c" };
    const logs = t.taskLogs([line, { ...line, id: "8", rank: 2 }]);
    expect(logs.map((l) => [l.id, l.rank])).toEqual([
      [7, null],
      [8, 2],
    ]);
  });

  it("decodes checkpoints with byte sizes as strings", () => {
    const c = t.checkpointList(
      {
        checkpoints: [
          { uuid: "u", trial_id: 1, experiment_id: 3, allocation_id: "", task_id: "", steps_completed: "10", metadata: '{"steps_completed": 10}', resources: { "a.pt": "12" }, size: "12", state: "COMPLETED", report_time: 4, storage: "{}", searcher_metric: null },
        ],
      },
    );
    expect(c[0]?.resources).toEqual({ "a.pt": 12 });
    expect(c[0]?.metadata).toEqual({ steps_completed: 10 });
  });

  it("decodes jobs, pools and agents", () => {
    const jobs = t.jobList({ jobs: [{ job_id: "j", type: "TYPE_EXPERIMENT", name: "n", priority: 42, weight: 1, submission_time: 1, acquired_slots: 0, needed_slots: 1, state: "STATE_QUEUED", username: "u", resource_pool: "default", entity_id: 3 }] });
    expect(jobs[0]?.entity_id).toBe(3);
    const pools = t.resourcePoolList({ pools: [{ name: "default", description: "", scheduler: "priority", fitting_policy: "best", preemption: false, num_agents: 1, slots_total: 2, slots_used: 1, is_default: true }] });
    expect(pools[0]?.slots_total).toBe(2);
    const agentJson = { id: "a", address: "127.0.0.1", slots: [{ id: "0", type: "cpu", device: "cpu", uuid: "", enabled: true, allocation_id: "" }], resource_pool: "default", registered_time: 1, enabled: true, draining: false, connected: true, runtime: "process", version: "0.1.0", container_ids: [] };
    const agents = t.agentList({ agents: [agentJson] });
    expect(agents[0]?.slots).toHaveLength(1);
    expect(agents[0]?.problems).toEqual([]);
    const wrong = t.agentList({ agents: [{ ...agentJson, problems: ["its clock is 90 s ahead of the master's"] }] });
    expect(wrong[0]?.problems).toEqual(["its clock is 90 s ahead of the master's"]);
    // Elastic pools: their instances and provisioning beside the agents; none without them.
    expect(t.cluster({ agents: [agentJson] })).toMatchObject({ instances: [], provisioners: [] });
    const elastic = t.cluster({
      agents: [],
      instances: [{ id: "i-1", resource_pool: "gpu", state: "idle", launched_at: 5, agent_id: "gpu-1", idle_since: 9 }],
      provisioners: [{ resource_pool: "gpu", provider: "aws", min_instances: 0, max_instances: 4, error: "cannot launch", last_decision: "" }],
    });
    expect(elastic.instances[0]?.idle_since).toBe(9);
    expect(elastic.provisioners[0]?.error).toBe("cannot launch");
  });

  it("decodes live events, tolerating fields the master leaves out", () => {
    expect(decoders.experiment({ id: 3, state: "PAUSED" })).toEqual({ id: 3, state: "PAUSED" });
    expect(decoders.metrics({ trial_id: 2 })).toEqual({ trial_id: 2, experiment_id: 0, groups: [], steps_completed: 0 });
    expect(() => decoders.logs({})).toThrow(DecodeError);
  });
});

describe("the master's answer", () => {
  it("carries the cluster message when one is shown, else null", () => {
    const shown = { version: "0.1.0", cluster_id: "c", cluster_message: { message: "maintenance at noon", start_time: 1 } };
    expect(decode(t.masterInfo, shown).cluster_message).toEqual({ message: "maintenance at noon" });
    expect(decode(t.masterInfo, { version: "0.1.0", cluster_message: null }).cluster_message).toBeNull();
    expect(decode(t.masterInfo, { version: "0.1.0" }).cluster_message).toBeNull();
  });
});
