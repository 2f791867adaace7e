"""What the tests share (import it; nothing imports a conftest):

- ``nodes``: nodes in the test's event loop, built by ``Node.open`` (``open_node``,
  ``running_node``), their data directories (``prepare``) and modules (``plugins_with``);
- ``fakes``: an in-process relay implementing the hub link (``FakeHub``), a module that
  completes every task;
- ``hubs``: a real hub server in the test's event loop, hub clients, raw frames (the fixtures of
  ``tests/hub`` and ``tests/link``);
- ``processes``: free ports, ``anet hub serve`` and nodes driven through the ``anet`` CLI;
- ``waiting``: bounded waits (``eventually``, ``wait_for``);
- ``messages``: user messages, as wire JSON and as a2a-sdk objects;
- ``sdk_backend``: a backend built on the official a2a-sdk server.
"""
