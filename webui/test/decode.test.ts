import { describe, expect, it } from "vitest";
import { anyObject, array, decode, DecodeError, int, jsonText, nullable, num, object, str, time } from "../src/api/decode";
import * as t from "../src/api/types";
import { decoders } from "../src/api/stream";

// Shapes exactly as the master writes them (protojson.to_dict: lowerCamelCase, defaults included).
const EXPERIMENT = {
  id: 3,
  name: "mnist",
  description: "",
  labels: ["a"],
  state: "STATE_ACTIVE",
  startTime: "2026-11-22T10:31:49.800Z",
  endTime: null,
  username: "determined",
  archived: false,
  progress: 0.25,
  numTrials: 2,
  resourcePool: "default",
  jobId: "294e786a",
  searcherType: "single",
  searcherMetric: "loss",
  smallerIsBetter: true,
  bestTrialSearcherMetric: null,
  forkedFrom: null,
  projectName: "Uncategorized",
  projectId: 1,
  workspaceName: "Uncategorized",
  workspaceId: 1,
  userId: 1,
  trialIds: [1, 2],
  hyperparameters: { lr: 0.1 },
  config: null,
  originalConfig: "",
  checkpointSize: "0",
  checkpointCount: 0,
};

const TRIAL = {
  id: 1,
  experimentId: 3,
  startTime: "1970-01-01T00:00:01.500Z",
  endTime: "1970-01-01T00:00:02.500Z",
  state: "STATE_COMPLETED",
  hparams: { lr: 0.1, opt: { name: "sgd" } },
  totalBatchesProcessed: 120,
  latestValidation: {
    endTime: "1970-01-01T00:00:02Z",
    numInputs: 0,
    totalBatches: 100,
    metrics: { avgMetrics: { loss: 0.5 }, batchMetrics: [] },
  },
  warmStartCheckpointUuid: "",
  taskId: "3.1",
  totalCheckpointSize: "0",
  restarts: 0,
  checkpointCount: 0,
  taskIds: ["3.1"],
  searcherMetricValue: 0.5,
  metadata: {},
  logPolicyMatched: null,
  seed: "2145849415",
  runId: 1,
  latestCheckpointUuid: null,
  bestValidationMetric: 0.5,
  searcherLength: "5",
  progress: 0.0,
  earlyExit: "",
  phase: "TRIAL_PHASE_COMPLETED",
  parentTrialId: null,
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
    const pagination = { offset: 0, limit: 0, startIndex: 0, endIndex: 1, total: 10000 };
    const list = t.experimentList({ experiments: [EXPERIMENT], pagination });
    expect(list.total).toBe(10000);
    expect(list.experiments[0]?.state).toBe("ACTIVE");
    expect(list.experiments[0]?.bestTrialSearcherMetric).toBeNull();
    expect(list.experiments[0]?.startTime).toBeCloseTo(1795343509.8, 3);
    expect(list.experiments[0]?.forkedFrom).toBeNull();
  });

  it("rejects an unknown state", () => {
    const pagination = { total: 1 };
    expect(() => decode(t.experimentList, { experiments: [{ ...EXPERIMENT, state: "STATE_NAPPING" }], pagination })).toThrow(
      'experiments[0].state: unknown state "NAPPING"',
    );
  });

  it("decodes a trial with parsed hyperparameters and integer strings", () => {
    const trial = t.trialOne({ trial: TRIAL });
    expect(trial.hparams).toEqual({ lr: 0.1, opt: { name: "sgd" } });
    expect(trial.totalBatchesProcessed).toBe(120);
    expect(trial.latestValidation).toEqual({ loss: 0.5 });
    expect(trial.startTime).toBe(1.5);
    expect(trial.warmStartCheckpointUuid).toBeNull();
    expect(trial.seed).toBe(2145849415);
    expect(trial.state).toBe("COMPLETED");
    expect(trial.phase).toBe("COMPLETED");
  });

  it("decodes a PBT child's parent, absent for other trials", () => {
    expect(t.trialOne({ trial: TRIAL }).parentTrialId).toBeNull();
    expect(t.trialOne({ trial: { ...TRIAL, parentTrialId: 7 } }).parentTrialId).toBe(7);
    expect(() => t.trialOne({ trial: { ...TRIAL, parentTrialId: "x" } })).toThrow(/trial\.parentTrialId/);
  });

  it("decodes every trial phase and rejects an unknown one", () => {
    expect(t.trialOne({ trial: { ...TRIAL, phase: "TRIAL_PHASE_AWAITING_VERDICT" } }).phase).toBe("AWAITING_VERDICT");
    expect(() => t.trialOne({ trial: { ...TRIAL, phase: "TRIAL_PHASE_NAPPING" } })).toThrow(
      'trial.phase: unknown trial phase "NAPPING"',
    );
  });

  it("decodes the experiment detail's config JSON", () => {
    const d = t.experimentDetail({
      experiment: { ...EXPERIMENT, originalConfig: "name: x\n", config: { searcher: { name: "single" } } },
      jobSummary: null,
      config: { searcher: { name: "single" } },
    });
    expect(d.config).toEqual({ searcher: { name: "single" } });
    expect(d.originalConfig).toBe("name: x\n");
  });

  it("decodes metric reports", () => {
    const reports = t.metricReports(
      [{ group: "training", stepsCompleted: "5", metrics: '{"loss": 0.5}', timestamp: 3.0, batchMetrics: "" }],
    );
    expect(reports).toEqual([{ group: "training", stepsCompleted: 5, metrics: { loss: 0.5 }, timestamp: 3 }]);
  });

  it("decodes streamed log lines with and without a rank", () => {
    const line = {
      id: "7",
      timestamp: "1970-01-01T00:00:01Z",
      message: "hi",
      level: "LOG_LEVEL_INFO",
      trialId: 1,
      agentId: "agent-0",
      containerId: "c",
      rankId: null,
      log: "hi",
      stdtype: "stdout",
      taskId: "1.1",
      allocationId: "a",
    };
    const decoder = t.streamLine(t.taskLog);
    const logs = [{ result: line }, { result: { ...line, id: "8", rankId: 2, level: "LOG_LEVEL_UNSPECIFIED" } }].map(decoder);
    expect(logs.map((l) => [l.id, l.rankId, l.level, l.timestamp])).toEqual([
      [7, null, "INFO", 1],
      [8, 2, "", 1],
    ]);
    expect(() => decoder({ error: { code: 5, reason: "NotFound", error: "trial 9 not found" } })).toThrow(/trial 9 not found/);
  });

  it("decodes checkpoints with byte sizes as strings", () => {
    const c = t.checkpointList(
      {
        checkpoints: [
          {
            taskId: "3.1",
            allocationId: "3.1.0",
            uuid: "u",
            reportTime: "1970-01-01T00:00:04Z",
            resources: { "a.pt": "12" },
            metadata: { steps_completed: 10 },
            state: "STATE_COMPLETED",
            training: { trialId: 1, experimentId: 3, searcherMetric: 0.5 },
            stepsCompleted: "10",
            size: "12",
            storage: { type: "shared_fs" },
          },
        ],
        pagination: { offset: 0, limit: 0, startIndex: 0, endIndex: 1, total: 1 },
      },
    );
    expect(c[0]?.resources).toEqual({ "a.pt": 12 });
    expect(c[0]?.metadata).toEqual({ steps_completed: 10 });
    expect([c[0]?.trialId, c[0]?.state, c[0]?.reportTime, c[0]?.searcherMetric]).toEqual([1, "COMPLETED", 4, 0.5]);
  });

  it("decodes jobs, pools and agents", () => {
    const pagination = { offset: 0, limit: 0, startIndex: 0, endIndex: 1, total: 1 };
    const jobJson = {
      summary: { state: "STATE_QUEUED", jobsAhead: 0 },
      type: "TYPE_EXPERIMENT",
      submissionTime: "1970-01-01T00:00:01Z",
      username: "u",
      resourcePool: "default",
      isPreemptible: false,
      priority: 42,
      weight: 1,
      entityId: "3",
      jobId: "j",
      requestedSlots: 1,
      allocatedSlots: 0,
      name: "n",
      progress: 0,
      userId: 1,
      workspaceId: 1,
      note: "",
    };
    const jobs = t.jobList({ jobs: [jobJson], pagination });
    expect(jobs[0]).toMatchObject({ entityId: 3, state: "STATE_QUEUED", neededSlots: 1, submissionTime: 1 });
    const poolJson = {
      name: "default",
      description: "",
      type: "RESOURCE_POOL_TYPE_STATIC",
      numAgents: 1,
      slotsAvailable: 2,
      slotsUsed: 1,
      defaultComputePool: true,
      schedulerType: "SCHEDULER_TYPE_FAIR_SHARE",
      schedulerFittingPolicy: "FITTING_POLICY_WORST",
      details: { priorityScheduler: { preemption: true, defaultPriority: 42 } },
    };
    const pools = t.resourcePoolList({ resourcePools: [poolJson], pagination });
    expect(pools[0]).toMatchObject({ slotsTotal: 2, scheduler: "fair_share", fittingPolicy: "worst", preemption: true, isDefault: true });
    const agentJson = {
      id: "a",
      registeredTime: "1970-01-01T00:00:01Z",
      slots: { "0": { id: "0", device: { id: 0, brand: "cpu", uuid: "", type: "TYPE_CPU" }, enabled: true, container: null, draining: false, allocationId: "" } },
      containers: {},
      resourcePools: ["default"],
      addresses: ["127.0.0.1"],
      enabled: true,
      draining: false,
      version: "0.1.0",
      slotStats: { typeStats: {}, brandStats: {} },
      connected: true,
      runtime: "process",
      problems: [],
    };
    const agents = t.agentList({ agents: [agentJson] });
    expect(agents[0]?.slots).toEqual([{ id: "0", type: "cpu", device: "cpu", enabled: true, allocationId: "" }]);
    expect([agents[0]?.address, agents[0]?.resourcePool, agents[0]?.problems]).toEqual(["127.0.0.1", "default", []]);
    const wrong = t.agentList({ agents: [{ ...agentJson, problems: ["its clock is 90 s ahead of the master's"] }] });
    expect(wrong[0]?.problems).toEqual(["its clock is 90 s ahead of the master's"]);
    // Elastic pools: their instances and provisioning beside the agents; none without them.
    expect(t.cluster({ agents: [agentJson] })).toMatchObject({ instances: [], provisioners: [] });
    const elastic = t.cluster({
      agents: [],
      instances: [{ id: "i-1", resourcePool: "gpu", state: "idle", launchedAt: "1970-01-01T00:00:05Z", agentId: "gpu-1", idleSince: "1970-01-01T00:00:09Z" }],
      provisioners: [{ resourcePool: "gpu", provider: "aws", minInstances: 0, maxInstances: 4, error: "cannot launch", lastDecision: "" }],
    });
    expect(elastic.instances[0]?.idleSince).toBe(9);
    expect(elastic.provisioners[0]?.error).toBe("cannot launch");
  });

  it("decodes live events, tolerating fields the master leaves out", () => {
    expect(decoders.experiment({ id: 3, state: "PAUSED" })).toEqual({ id: 3, state: "PAUSED" });
    expect(decoders.metrics({ trialId: 2 })).toEqual({ trialId: 2, experimentId: 0, groups: [], stepsCompleted: 0 });
    expect(() => decoders.logs({})).toThrow(DecodeError);
  });
});

describe("the master's answer", () => {
  it("carries the cluster message when one is shown, else null", () => {
    const shown = { version: "0.1.0", clusterId: "c", clusterMessage: { message: "maintenance at noon", startTime: "1970-01-01T00:00:01Z" } };
    expect(decode(t.masterInfo, shown).clusterMessage).toEqual({ message: "maintenance at noon" });
    expect(decode(t.masterInfo, { version: "0.1.0", clusterMessage: null }).clusterMessage).toBeNull();
    expect(decode(t.masterInfo, { version: "0.1.0" }).clusterMessage).toBeNull();
  });
});

describe("times", () => {
  it("reads a Timestamp's RFC 3339 text as seconds since the epoch, fraction and offset kept", () => {
    expect(time("1970-01-01T00:00:01Z")).toBe(1);
    expect(time("1970-01-01T00:00:01.250Z")).toBe(1.25);
    expect(time("1970-01-01T00:00:01.000001Z")).toBeCloseTo(1.000001, 9);
    expect(time("1970-01-01T01:00:00+01:00")).toBe(0);
    expect(() => time(1.5)).toThrow(/expected an RFC 3339 time/);
    expect(() => time("yesterday")).toThrow(DecodeError);
  });
});
