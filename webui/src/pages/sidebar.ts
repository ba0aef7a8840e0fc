// The sidebar: every workspace and, under each, its projects (the default "Uncategorized"
// included), each a link to its project page; the current project is marked.

import { api, errorMessage } from "../api/client";
import type { Project, Workspace } from "../api/org";
import { h, link, replace } from "../ui/dom";
import { coalesce } from "../ui/widgets";

export class Sidebar {
  readonly el = h("aside", { class: "sidebar", hidden: true });
  private readonly list = h("div", { class: "sidebar-list" });
  private readonly problem = h("p", { class: "sidebar-error", role: "alert", hidden: true });
  readonly refresh: () => Promise<void>;

  constructor() {
    replace(
      this.el,
      h("div", { class: "sidebar-head" }, "Workspaces"),
      this.problem,
      this.list,
      h("div", { class: "sidebar-head" }, link("/models", "Model registry")),
    );
    this.refresh = coalesce(() => this.load());
  }

  /** Mark the link to `path` (the page shown) as current. */
  mark(path: string): void {
    for (const a of this.el.querySelectorAll("a")) a.classList.toggle("active", a.getAttribute("href") === path);
  }

  private async load(): Promise<void> {
    try {
      // Two requests, however many workspaces there are.
      const [all, projects] = await Promise.all([api.workspaces(), api.allProjects()]);
      const workspaces = all.filter((w) => !w.archived);
      replace(this.list, ...workspaces.map((w) => this.workspace(w, projects.filter((p) => p.workspaceId === w.id))));
      this.problem.hidden = true;
      this.mark(location.pathname);
    } catch (e) {
      this.problem.textContent = `Could not load the workspaces: ${errorMessage(e)}`;
      this.problem.hidden = false;
    }
  }

  private workspace(w: Workspace, projects: Project[]): HTMLElement {
    const shown = projects.filter((p) => !p.archived);
    return h(
      "div",
      { class: "sidebar-workspace", data: { workspace: w.name } },
      h("div", { class: "sidebar-workspace-name", title: `workspace ${w.id}, ${w.username}'s` }, w.name),
      h(
        "ul",
        {},
        ...shown.map((p) =>
          h(
            "li",
            { data: { project: p.name } },
            link(`/projects/${p.id}`, p.name),
            h("span", { class: "count" }, String(p.numExperiments)),
          ),
        ),
      ),
    );
  }
}
