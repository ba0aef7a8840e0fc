// Log in: username and password, the master's own message when they are wrong, and back to
// the page the user came from. The master answers with the session as an HttpOnly cookie.

import { api, errorMessage } from "../api/client";
import type { Page } from "../router";
import { currentUser, nextPath } from "../session";
import { h, replace } from "../ui/dom";
import { Notice } from "../ui/widgets";

export const loginPage: Page = (root, _params, ctx) => {
  const notice = new Notice();
  const username = h("input", { type: "text", name: "username", class: "username", autocomplete: "username", required: true });
  const password = h("input", { type: "password", name: "password", class: "password", autocomplete: "current-password" });
  const submit = h("button", { type: "submit", class: "primary" }, "Log in");
  const form = h(
    "form",
    { class: "card login-form" },
    h("h1", {}, "Log in to pydet"),
    notice.el,
    h("label", {}, "Username", username),
    h("label", {}, "Password", password),
    h("div", { class: "buttons" }, submit),
  );
  let gone = false;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    submit.disabled = true;
    notice.loading("Logging in…");
    api.login(username.value.trim(), password.value).then(
      (user) => {
        if (gone) return;
        currentUser.set(user);
        ctx.navigate(nextPath(location.search), true);
      },
      (e: unknown) => {
        if (gone) return;
        submit.disabled = false;
        notice.error(errorMessage(e));
        password.value = "";
        password.focus();
      },
    );
  });
  replace(root, h("div", { class: "login" }, form));
  username.focus();
  return () => {
    gone = true;
  };
};
