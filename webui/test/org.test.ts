import { describe, expect, it } from "vitest";

import { decode } from "../src/api/decode";
import { modelVersionList, projectList, workspaceList } from "../src/api/org";

// Answers of a real master, trimmed to one item each (Determined's JSON).
const workspaces = {
  workspaces: [
    { id: 1, name: "Uncategorized", archived: false, username: "admin", immutable: true, numProjects: 1, pinned: false, userId: 0, numExperiments: 0, state: "WORKSPACE_STATE_UNSPECIFIED", errorMessage: "", checkpointStorageConfig: null, pinnedAt: null, defaultComputePool: "", defaultAuxPool: "" },
  ],
  pagination: { offset: 0, limit: 0, startIndex: 0, endIndex: 1, total: 1 },
};
const projects = {
  projects: [
    { id: 2, name: "proj", workspaceId: 2, description: "", lastExperimentStartedAt: null, notes: [{ name: "Readme", contents: "# hi" }], numExperiments: 0, numActiveExperiments: 0, archived: false, username: "admin", immutable: false, userId: 1, workspaceName: "team", state: "WORKSPACE_STATE_UNSPECIFIED", errorMessage: "", key: "PRO8C", numRuns: 0 },
  ],
};
const model = { name: "m1", description: "d", metadata: {}, creationTime: "2026-11-29T00:59:31.168247Z", lastUpdatedTime: "2026-11-29T00:59:31.175021Z", id: 1, numVersions: 1, labels: ["a"], username: "admin", archived: false, notes: "", userId: 1, workspaceId: 1 };
const versions = {
  model,
  modelVersions: [
    {
      model,
      checkpoint: {
        taskId: "1.1", allocationId: "1.1.913967712", uuid: "3e4da291-bcdf-495e-a100-ebfde00ba010", reportTime: "2026-11-29T00:59:30.377Z",
        resources: { "state.json": "12" }, metadata: { steps_completed: 10 }, state: "STATE_COMPLETED",
        training: { trialId: 1, experimentId: 1, validationMetrics: { avgMetrics: { validation_loss: 1.07, accuracy: 0.025 }, batchMetrics: [] }, searcherMetric: 1.07 },
        stepsCompleted: "10", size: "39", storage: {},
      },
      version: 1, creationTime: "2026-11-29T00:59:31.174952Z", id: 1, name: "v", metadata: {}, lastUpdatedTime: "2026-11-29T00:59:31.174952Z", comment: "", username: "admin", labels: ["x"], notes: "n", userId: 1,
    },
  ],
  pagination: { offset: 0, limit: 0, startIndex: 0, endIndex: 1, total: 1 },
};

describe("workspaces, projects and the model registry", () => {
  it("decodes the master's answers", () => {
    expect(decode(workspaceList, workspaces)[0]?.immutable).toBe(true);
    const [p] = decode(projectList, projects);
    expect(p?.workspaceName).toBe("team");
    expect(p?.notes).toEqual([{ name: "Readme", contents: "# hi" }]);
    const { model: m, versions: [v] } = decode(modelVersionList, versions);
    expect(m.numVersions).toBe(1);
    expect(v?.checkpoint.stepsCompleted).toBe(10);
    expect(v?.checkpoint.validationMetrics).toEqual({ validation_loss: 1.07, accuracy: 0.025 });
  });

  it("names the field the master left out", () => {
    const broken = { projects: [{ ...projects.projects[0], workspaceName: undefined }] };
    expect(() => decode(projectList, broken)).toThrow(/\[0\]\.workspaceName/);
  });
});
