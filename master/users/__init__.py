"""Users as the SDK sees and edits them: ``profiles`` reads a user by id or name and
changes what ``auth`` does not (display name, username, agent user and group, remote
sign-on), and writes a user as the API shows it.

May use: ``auth`` (creating users, their sessions and the owner cache a rename makes stale),
``queries`` and ``store``. Used by the façade (``service``) and the servicer.
"""
