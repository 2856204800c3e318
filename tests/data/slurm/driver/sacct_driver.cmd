sacct -X -P --noheader --jobs=259\,260\,261\,262\,263\,264\,265 --format=JobID\,JobIDRaw\,State\,ExitCode\,Start\,End\,Reason
