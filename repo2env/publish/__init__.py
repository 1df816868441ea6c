"""Publishing: validated tasks -> an environment dataset (a folder or the Hugging Face Hub)."""
