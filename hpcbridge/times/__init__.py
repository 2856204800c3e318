"""Times a request gives: wall times (``durations``) and start times (``begins``)."""
