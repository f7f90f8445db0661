"""The Docker runner: engine connection, container spec, options and the running container."""
