"""An experiment's statistics: methods compared question by question, and where each lost the gold."""
