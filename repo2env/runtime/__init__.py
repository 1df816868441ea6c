"""Container runtime: base images, the sandbox protocol and its Docker backend."""
