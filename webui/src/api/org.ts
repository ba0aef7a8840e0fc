// Where work is kept: workspaces, their projects (with notes) and the model registry, in
// Determined's JSON (protobuf's JSON mapping: lowerCamelCase keys, 64-bit integers as text).

import { anyObject, array, bool, type Decoder, int, map, nullable, num, object, optional, str } from "./decode";

export interface Workspace {
  id: number;
  name: string;
  archived: boolean;
  username: string;
  /** The default "Uncategorized" workspace, which cannot be changed. */
  immutable: boolean;
  numProjects: number;
  numExperiments: number;
}
export const workspace: Decoder<Workspace> = object<Workspace>({
  id: int,
  name: str,
  archived: bool,
  username: str,
  immutable: bool,
  numProjects: int,
  numExperiments: int,
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
  workspaceId: number;
  workspaceName: string;
  description: string;
  notes: Note[];
  numExperiments: number;
  numActiveExperiments: number;
  archived: boolean;
  username: string;
  userId: number;
  immutable: boolean;
}
export const project: Decoder<Project> = object<Project>({
  id: int,
  name: str,
  workspaceId: int,
  workspaceName: str,
  description: str,
  notes: array(note),
  numExperiments: int,
  numActiveExperiments: int,
  archived: bool,
  username: str,
  userId: int,
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
  userId: number;
  numVersions: number;
  archived: boolean;
  notes: string;
  workspaceId: number;
}
export const model: Decoder<Model> = object<Model>({
  id: int,
  name: str,
  description: str,
  labels: optional(array(str), []),
  username: str,
  userId: int,
  numVersions: int,
  archived: bool,
  notes: optional(str, ""),
  workspaceId: int,
});
export const modelList: Decoder<Model[]> = map(object({ models: array(model) }), (r) => r.models);
export const modelOne: Decoder<Model> = map(object({ model }), (r) => r.model);

/** The checkpoint a model version holds (Determined's Checkpoint, its training metadata
 * flattened here), with the validation metrics reported at its step. */
export interface VersionCheckpoint {
  uuid: string;
  trialId: number;
  experimentId: number;
  stepsCompleted: number;
  /** COMPLETED, DELETED, ... */
  state: string;
  searcherMetric: number | null;
  validationMetrics: Record<string, unknown>;
}
export const versionCheckpoint: Decoder<VersionCheckpoint> = map(
  object({
    uuid: str,
    training: nullable(
      object({
        trialId: optional(nullable(int), null),
        experimentId: optional(nullable(int), null),
        searcherMetric: optional(nullable(num), null),
        validationMetrics: nullable(object({ avgMetrics: nullable(anyObject) })),
      }),
    ),
    stepsCompleted: optional(int, 0),
    state: str,
  }),
  (c) => ({
    uuid: c.uuid,
    trialId: c.training?.trialId ?? 0,
    experimentId: c.training?.experimentId ?? 0,
    stepsCompleted: c.stepsCompleted,
    state: c.state.replace(/^STATE_/, ""),
    searcherMetric: c.training?.searcherMetric ?? null,
    validationMetrics: c.training?.validationMetrics?.avgMetrics ?? {},
  }),
);

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
  object({ model, modelVersions: array(modelVersion) }),
  (r) => ({ model: r.model, versions: r.modelVersions }),
);
export const modelVersionOne: Decoder<ModelVersion> = map(object({ modelVersion: modelVersion }), (r) => r.modelVersion);
