sacct -X -P --noheader --jobs=32_0\,32_1 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
