import { describe, expect, it } from "vitest";

import { decode } from "../src/api/decode";
import { modelVersionList, projectList, workspaceList } from "../src/api/org";

// Answers of a real master (main, today), trimmed to one item each.
const workspaces = {
  workspaces: [
    { id: 1, name: "Uncategorized", archived: false, username: "admin", immutable: true, num_projects: 1, pinned: false, user_id: 0, num_experiments: 0, state: "WORKSPACE_STATE_UNSPECIFIED", error_message: "", checkpoint_storage_config: null, pinned_at: null, default_compute_pool: "", default_aux_pool: "" },
  ],
  pagination: { offset: 0, limit: 0, start_index: 0, end_index: 1, total: 1 },
};
const projects = {
  projects: [
    { id: 2, name: "proj", workspace_id: 2, description: "", last_experiment_started_at: null, notes: [{ name: "Readme", contents: "# hi" }], num_experiments: 0, num_active_experiments: 0, archived: false, username: "admin", immutable: false, user_id: 1, workspace_name: "team", state: "WORKSPACE_STATE_UNSPECIFIED", error_message: "", key: "PRO8C", num_runs: 0 },
  ],
};
const model = { name: "m1", description: "d", metadata: {}, creation_time: "2026-11-29T00:59:31.168247Z", last_updated_time: "2026-11-29T00:59:31.175021Z", id: 1, num_versions: 1, labels: ["a"], username: "admin", archived: false, notes: "", user_id: 1, workspace_id: 1 };
const versions = {
  model,
  model_versions: [
    {
      model,
      checkpoint: { uuid: "3e4da291-bcdf-495e-a100-ebfde00ba010", trial_id: 1, experiment_id: 1, allocation_id: "1.1.913967712", task_id: "1.1", steps_completed: "10", metadata: '{"steps_completed":10}', resources: { "state.json": "12" }, size: "39", state: "COMPLETED", report_time: 1795913970.3778005, storage: "{}", searcher_metric: 1.07, validation_metrics: '{"validation_loss":1.07,"accuracy":0.025}' },
      version: 1, creation_time: "2026-11-29T00:59:31.174952Z", id: 1, name: "v", metadata: {}, last_updated_time: "2026-11-29T00:59:31.174952Z", comment: "", username: "admin", labels: ["x"], notes: "n", user_id: 1,
    },
  ],
  pagination: { offset: 0, limit: 0, start_index: 0, end_index: 1, total: 1 },
};

describe("workspaces, projects and the model registry", () => {
  it("decodes the master's answers", () => {
    expect(decode(workspaceList, workspaces)[0]?.immutable).toBe(true);
    const [p] = decode(projectList, projects);
    expect(p?.workspace_name).toBe("team");
    expect(p?.notes).toEqual([{ name: "Readme", contents: "# hi" }]);
    const { model: m, versions: [v] } = decode(modelVersionList, versions);
    expect(m.num_versions).toBe(1);
    expect(v?.checkpoint.steps_completed).toBe(10);
    expect(v?.checkpoint.validation_metrics).toEqual({ validation_loss: 1.07, accuracy: 0.025 });
  });

  it("names the field the master left out", () => {
    const broken = { projects: [{ ...projects.projects[0], workspace_name: undefined }] };
    expect(() => decode(projectList, broken)).toThrow(/\[0\]\.workspace_name/);
  });
});
