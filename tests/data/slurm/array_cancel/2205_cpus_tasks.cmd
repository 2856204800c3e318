sacct -X -P --noheader --jobs=39_0\,39_1\,39_2 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
