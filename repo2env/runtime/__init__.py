"""Container runtime: the sandbox and backend protocols, the backends (docker, podman), image
layering, base images."""
