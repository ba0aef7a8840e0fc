// A project: its experiments (the experiments list scoped to it, with the same filters) and
// its notes, markdown shown as text; the project's owner (or an admin) edits them.

import { api, errorMessage } from "../api/client";
import type { Note, Project } from "../api/org";
import type { Page } from "../router";
import { currentUser } from "../session";
import { button, h, link, replace } from "../ui/dom";
import { markdown } from "../ui/markdown";
import { Notice } from "../ui/widgets";
import { experimentList } from "./experiments";

/** Whether the logged-in user may change `p` (the master checks again). */
function mayEdit(p: Project): boolean {
  const user = currentUser.get();
  return user !== null && !p.immutable && (user.admin || user.username === p.username);
}

class NotesView {
  readonly el = h("section", { class: "card notes" });
  private readonly notice = new Notice();
  private notes: Note[] = [];
  private editing = false;
  /** Stops following who is logged in (the edit button depends on it). */
  readonly close: () => void;

  constructor(private readonly project: Project) {
    this.notes = project.notes;
    this.close = currentUser.subscribe(() => {
      if (!this.editing) this.show();
    });
  }

  private show(): void {
    this.editing = false;
    const edit = mayEdit(this.project) ? button(this.notes.length ? "Edit" : "Add notes", () => this.edit(), "small notes-edit") : null;
    const body = h("div", { class: "notes-body" });
    for (const n of this.notes) {
      body.appendChild(h("div", { class: "note", data: { note: n.name } }, h("h3", {}, n.name), markdown(n.contents)));
    }
    if (!this.notes.length) body.appendChild(h("p", { class: "muted" }, "No notes."));
    replace(this.el, h("div", { class: "card-head" }, h("h2", {}, "Notes"), edit), this.notice.el, body);
  }

  private edit(): void {
    this.editing = true;
    const first = this.notes[0] ?? { name: "Notes", contents: "" };
    const name = h("input", { type: "text", value: first.name, class: "notes-name" });
    const text = h("textarea", { rows: 12, class: "notes-text", spellcheck: false });
    text.value = first.contents;
    const save = button("Save", () => {
      save.disabled = true;
      const notes = [{ name: name.value.trim() || "Notes", contents: text.value }, ...this.notes.slice(1)];
      api.putProjectNotes(this.project.id, notes).then(
        (saved) => {
          this.notes = saved;
          this.notice.clear();
          this.show();
        },
        (e: unknown) => {
          this.notice.error(`Could not save the notes: ${errorMessage(e)}`);
          save.disabled = false;
        },
      );
    }, "primary notes-save");
    replace(
      this.el,
      h("div", { class: "card-head" }, h("h2", {}, "Notes")),
      this.notice.el,
      h("div", { class: "notes-form" }, name, text, h("div", { class: "actions" }, button("Cancel", () => this.show()), save)),
    );
  }
}

export function projectPage(onMoved: () => void): Page {
  return (root, params, ctx) => {
    const id = Number(params.id);
    const notice = new Notice();
    const listRoot = h("div");
    replace(root, notice.el, listRoot);
    let notes: NotesView | null = null;
    let gone = false;
    // The list asks for its page at once; the heading and notes fill in when the project
    // arrives (one round trip, not two, before the first rows show).
    const title = h("h1", {}, `Project ${id}`);
    const where = h("span", { class: "muted" });
    const more = h("div");
    const head = h(
      "div",
      { class: "project-head" },
      h("div", { class: "page-head" }, title, where, h("span", { class: "count" }), h("span", { class: "spacer" }), link("/models", "Model registry")),
      more,
    );
    const unmount = experimentList(listRoot, ctx, { path: `/projects/${id}`, projectId: id, head, onMoved });
    api.project(id).then(
      (p) => {
        if (gone) return;
        notes = new NotesView(p);
        title.textContent = p.name;
        where.textContent = `in ${p.workspaceName}`;
        replace(more, p.description ? h("p", { class: "muted" }, p.description) : null, notes.el);
        document.title = `pydet · ${p.name}`;
      },
      (e: unknown) => {
        if (!gone) notice.error(`Could not load project ${params.id}: ${errorMessage(e)}`);
      },
    );
    return () => {
      gone = true;
      unmount();
      notes?.close();
    };
  };
}
