// Where work is kept: workspaces, their projects (with notes) and the model registry, as the
// master's JSON has them today (snake_case keys). Kept apart from types.ts so that a change of
// key style applies to these shapes on their own.

import { anyObject, array, bool, type Decoder, int, jsonText, map, nullable, num, object, optional, str } from "./decode";

export interface Workspace {
  id: number;
  name: string;
  archived: boolean;
  username: string;
  /** The default "Uncategorized" workspace, which cannot be changed. */
  immutable: boolean;
  num_projects: number;
  num_experiments: number;
}
export const workspace: Decoder<Workspace> = object<Workspace>({
  id: int,
  name: str,
  archived: bool,
  username: str,
  immutable: bool,
  num_projects: int,
  num_experiments: int,
});
export const workspaceList: Decoder<Workspace[]> = map(object({ workspaces: array(workspace) }), (r) => r.workspaces);

export interface Note {
  name: string;
  /** Markdown. */
  contents: string;
}
export const note: Decoder<Note> = object<Note>({ name: str, contents: str });
export const noteList: Decoder<Note[]> = map(object({ notes: array(note) }), (r) => r.notes);

export interface Project {
  id: number;
  name: string;
  workspace_id: number;
  workspace_name: string;
  description: string;
  notes: Note[];
  num_experiments: number;
  num_active_experiments: number;
  archived: boolean;
  username: string;
  user_id: number;
  immutable: boolean;
}
export const project: Decoder<Project> = object<Project>({
  id: int,
  name: str,
  workspace_id: int,
  workspace_name: str,
  description: str,
  notes: array(note),
  num_experiments: int,
  num_active_experiments: int,
  archived: bool,
  username: str,
  user_id: int,
  immutable: bool,
});
export const projectList: Decoder<Project[]> = map(object({ projects: array(project) }), (r) => r.projects);
export const projectOne: Decoder<Project> = map(object({ project }), (r) => r.project);

export interface Model {
  id: number;
  name: string;
  description: string;
  labels: string[];
  username: string;
  user_id: number;
  num_versions: number;
  archived: boolean;
  notes: string;
  workspace_id: number;
}
export const model: Decoder<Model> = object<Model>({
  id: int,
  name: str,
  description: str,
  labels: optional(array(str), []),
  username: str,
  user_id: int,
  num_versions: int,
  archived: bool,
  notes: optional(str, ""),
  workspace_id: int,
});
export const modelList: Decoder<Model[]> = map(object({ models: array(model) }), (r) => r.models);
export const modelOne: Decoder<Model> = map(object({ model }), (r) => r.model);

/** The checkpoint a model version holds, with the validation metrics reported with it. */
export interface VersionCheckpoint {
  uuid: string;
  trial_id: number;
  experiment_id: number;
  steps_completed: number;
  state: string;
  searcher_metric: number | null;
  validation_metrics: Record<string, unknown>;
}
export const versionCheckpoint: Decoder<VersionCheckpoint> = object<VersionCheckpoint>({
  uuid: str,
  trial_id: int,
  experiment_id: int,
  steps_completed: int,
  state: str,
  searcher_metric: optional(nullable(num), null),
  validation_metrics: optional(jsonText(anyObject, {}), {}),
});

export interface ModelVersion {
  id: number;
  version: number;
  name: string;
  checkpoint: VersionCheckpoint;
  labels: string[];
  notes: string;
  comment: string;
  username: string;
}
export const modelVersion: Decoder<ModelVersion> = object<ModelVersion>({
  id: int,
  version: int,
  name: str,
  checkpoint: versionCheckpoint,
  labels: optional(array(str), []),
  notes: optional(str, ""),
  comment: optional(str, ""),
  username: str,
});

export interface ModelVersions {
  model: Model;
  versions: ModelVersion[];
}
export const modelVersionList: Decoder<ModelVersions> = map(
  object({ model, model_versions: array(modelVersion) }),
  (r) => ({ model: r.model, versions: r.model_versions }),
);
export const modelVersionOne: Decoder<ModelVersion> = map(object({ model_version: modelVersion }), (r) => r.model_version);
