"""Who may call the master, and what they may do.

``authenticator``: users, password hashes (``passwords``), sessions, the first admin and
what a token stands for (``callers``); ``access_tokens``: users' long-lived bearer tokens;
``throttle`` slows password guessing; ``task_tokens``: a live allocation's token, scoped to
its task; ``permissions``: Determined's permissions and roles, and what a user may do
without one; ``groups`` and ``roles``: user groups and role assignments, ``grants``: what
each user's roles let them do; ``rules``: the authorization rule of every RPC (the gRPC door
and the HTTP gateway both check it); ``access``: the token, group and role calls for both
transports; ``redaction``: the secrets in experiment configs that callers are shown redacted.

May use: the domain packages below it (``experiments``, ``tasks``), ``queries``, ``store``.
Used by the transports (``guard``, ``api``, ``gateway``) and the façade (``service``).
"""
