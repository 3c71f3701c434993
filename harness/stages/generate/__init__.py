"""Generation alone: ``assay generate`` writes one model's C and manifest where the user says."""
