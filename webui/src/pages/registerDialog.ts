// "Register checkpoint": make a checkpoint a new version of a model, chosen from the registry
// or created here (POST /api/v1/models, then /api/v1/models/{name}/versions).

import { api, errorMessage } from "../api/client";
import type { Checkpoint } from "../api/types";
import { button, h, replace } from "../ui/dom";
import { Notice } from "../ui/widgets";
import { labelList } from "./experiments";
import { modal } from "./moveDialog";

const NEW = "\u0000new";

export function openRegisterDialog(uuid: string, done: (model: string, version: number) => void): void {
  const notice = new Notice();
  const modelSelect = h("select", { class: "register-model" });
  const newName = h("input", { type: "text", placeholder: "New model's name", class: "register-new-name" });
  const newBox = h("label", { hidden: true }, "Name ", newName);
  const versionName = h("input", { type: "text", placeholder: "Version name (optional)", class: "register-version-name" });
  const versionLabels = h("input", { type: "text", placeholder: "Labels (a, b)", class: "register-labels" });
  const notes = h("textarea", { rows: 4, placeholder: "Notes (markdown)", class: "register-notes" });
  const register = button("Register", () => void submit(), "primary register-confirm");
  const dialog = modal(
    `Register checkpoint ${uuid.slice(0, 8)}`,
    notice.el,
    h("label", {}, "Model ", modelSelect),
    newBox,
    h("label", {}, "Version ", versionName),
    h("label", {}, "Labels ", versionLabels),
    notes,
    h("div", { class: "modal-buttons" }, button("Cancel", () => dialog.close()), register),
  );
  const creating = () => modelSelect.value === NEW;
  modelSelect.addEventListener("change", () => {
    newBox.hidden = !creating();
  });

  const submit = async () => {
    register.disabled = true;
    try {
      let model = modelSelect.value;
      if (creating()) {
        const name = newName.value.trim();
        if (!name) throw new Error("name the new model");
        model = (await api.createModel({ name, description: "" })).name;
      }
      const v = await api.registerVersion(model, {
        checkpointUuid: uuid,
        name: versionName.value.trim(),
        notes: notes.value,
        labels: labelList(versionLabels.value),
      });
      dialog.close();
      done(model, v.version);
    } catch (e) {
      notice.error(`Could not register checkpoint ${uuid}: ${errorMessage(e)}`);
      register.disabled = false;
    }
  };

  api.models().then(
    (models) => {
      const open = models.filter((m) => !m.archived);
      replace(
        modelSelect,
        ...open.map((m) => h("option", { value: m.name }, m.name)),
        h("option", { value: NEW }, "New model…"),
      );
      newBox.hidden = !creating();
    },
    (e: unknown) => notice.error(`Could not load the models: ${errorMessage(e)}`),
  );
}

/** A checkpoint row's "Register" button (completed checkpoints only); `say` reports the
 * version made. */
export function registerCell(c: Pick<Checkpoint, "uuid" | "state">, say: (message: string) => void): Node | string {
  if (c.state !== "COMPLETED") return "";
  return button("Register", () => openRegisterDialog(c.uuid, (model, version) => say(`Registered ${c.uuid} as version ${version} of model ${model}.`)), "small action-register");
}
