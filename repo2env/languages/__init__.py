"""Language profiles (see repo2env.languages.base)."""
