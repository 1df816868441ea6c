"""Mining: merged PRs from a source -> Task candidates."""
