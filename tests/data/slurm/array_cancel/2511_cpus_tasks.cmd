sacct -X -P --noheader --jobs=9_0\,9_1\,9_2 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
