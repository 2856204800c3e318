"""From a job id or a record to the adapter that reaches it: where a recorded job runs
(``places``), which record an id means (``ids``), ids no record knows asked of their
scheduler (``unrecorded``), and recorded jobs asked for their state and charges, one
question per place (``refreshing``)."""
