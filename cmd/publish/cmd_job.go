package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/job"
)

func newJobCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Publish the output of many tasks with one atomic commit",
		Long: `A job is a fan-out whose tasks each write a part of one output, published
all at once by one commit, or not at all.

'job begin' opens the job and prints its id. Each task runs 'job put', which
stages its files under a generation of its own attempt and commits the task
by creating its task record, create-if-absent: the first attempt of a task
wins, a later one exits 3. 'job commit' reads the
task records and publishes every task's files with one compare-and-swap on
the dataset's pointer; run again after a crash, it reports the generation
that committed the job and commits nothing. 'job abort' deletes the job.
'job status' lists the tasks committed.

The records live under _job/<job>/ in the dataset; the collector ('publish
gc') removes those of a job left uncommitted longer than --orphan-age.` + exitStatus(exitOK, exitError, exitUsage, exitLost, exitUnknown, exitFenced, exitInterrupted),
		Example: `  JOB=$(publish job begin s3://bucket/out)
  seq 0 63 | xargs -P 16 -I{} publish job put --job "$JOB" --task {} out/part-{} s3://bucket/out
  publish job commit --job "$JOB" --expect-tasks 64 s3://bucket/out`,
	}
	cmd.AddCommand(newJobBeginCommand(g), newJobPutCommand(g), newJobCommitCommand(g), newJobAbortCommand(g), newJobStatusCommand(g))
	return cmd
}

func newJobBeginCommand(g *globalOptions) *cobra.Command {
	var id string
	var fence fenceFlags
	cmd := &cobra.Command{
		Use:   "begin URL",
		Short: "Open a job and print its id",
		Long: `Begin opens a job on the dataset at URL and prints its id: the one --job
gives (a workflow's run id, say), or a new one. Beginning a job that is open
already resumes it; one that was committed or aborted is refused.

A job begun with a fencing token (--fence and --fence-lease, or what 'publish
run' exports) commits fenced by it, like 'put': begin registers the token, so
that a lower token of the lease can no longer commit, and 'job commit' is
refused (exit 6) once a higher token of the lease was registered.` + exitStatus(exitOK, exitError, exitUsage, exitFenced, exitInterrupted),
		Example: `  JOB=$(publish job begin s3://bucket/out)
  publish job begin --job "$RUN_ID" s3://bucket/out
  publish run --lease nightly s3://bucket/out -- sh -c 'publish job begin --job "$RUN_ID" s3://bucket/out && ...'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := fence.fromEnv(cmd); err != nil {
				return err
			}
			if id == "" {
				var err error
				if id, err = generation.New(); err != nil {
					return err
				}
			}
			if err := job.ValidID("job", id); err != nil {
				return &usageError{err}
			}
			d, err := g.openDataset(ctx, args[0])
			if err != nil {
				return err
			}
			if fence.Fence != 0 {
				// Before the job's record: from now on a lower token of
				// this lease cannot commit.
				if err := d.RegisterFence(ctx, fence.FenceLease, fence.Fence); err != nil {
					return describe(args[0], err)
				}
			}
			if _, err := job.Begin(ctx, d, id, job.Options{Fence: fence.Fence, FenceLease: fence.FenceLease}); err != nil {
				return describe(args[0], err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), id)
			return nil
		},
	}
	cmd.Flags().StringVar(&id, "job", "", "the job's id (default: a new one)")
	fence.add(cmd)
	return cmd
}

func newJobPutCommand(g *globalOptions) *cobra.Command {
	var id, task, attempt string
	cmd := &cobra.Command{
		Use:   "put --job ID --task T [--attempt A] SRC URL",
		Short: "Run one attempt of a task: stage SRC and commit the task",
		Long: `Put stages SRC (a directory, whose files keep their paths below it, or one
file, by its name) under a generation of this attempt, then commits the task
by creating its record, create-if-absent. Nothing is visible in the dataset
until 'job commit'.

The first attempt of a task to commit it wins. A later attempt (a retry, or a
speculative copy running at the same time) exits 3; it deletes what it staged
once it has proven that no commit of the job has started (the job has no
commit record, and the collector has not passed it), and otherwise leaves it
to 'publish gc'. An attempt run again with the --attempt of the one that won exits 0: the
task's files are those of the run that won. When the outcome cannot be
proven, put exits 5 and deletes nothing; run it again.` + exitStatus(exitOK, exitError, exitUsage, exitLost, exitUnknown, exitInterrupted),
		Example: `  publish job put --job "$JOB" --task 7 --attempt 7-a1 out/part-7 s3://bucket/out`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if attempt == "" {
				host, _ := os.Hostname()
				attempt = fmt.Sprintf("%s-%d", host, os.Getpid())
				if job.ValidID("attempt", attempt) != nil {
					attempt = "pid-" + strconv.Itoa(os.Getpid())
				}
			}
			for what, v := range map[string]string{"job": id, "task": task, "attempt": attempt} {
				if err := job.ValidID(what, v); err != nil {
					return &usageError{err}
				}
			}
			src, url := args[0], args[1]
			fi, err := os.Stat(src)
			if err != nil {
				return err
			}
			d, err := g.openDataset(ctx, url)
			if err != nil {
				return err
			}
			j, err := job.Open(ctx, d, id)
			if err != nil {
				return describe(url, err)
			}
			tk, err := j.Task(task, attempt, "")
			if err != nil {
				return &usageError{err}
			}
			g.log().Info("staging", "job", id, "task", task, "attempt", attempt, "generation", tk.Generation())
			if fi.IsDir() {
				err = tk.Tx().AddDir(ctx, src)
			} else {
				err = tk.Tx().PutFile(ctx, filepath.Base(src), src)
			}
			if err != nil {
				tk.Discard(context.WithoutCancel(ctx)) //nolint:errcheck // the collector removes what is left
				return err
			}
			rec, err := tk.Commit(ctx)
			if errors.Is(err, job.ErrTaskLost) {
				return err // exit 3
			}
			if err != nil {
				return describe(url, err)
			}
			fmt.Fprintf(g.out(cmd.OutOrStdout()), "task %s committed by attempt %s: %d files\n", task, rec.Attempt, len(rec.Entries))
			return nil
		},
	}
	cmd.Flags().StringVar(&id, "job", "", "the job's id (required)")
	cmd.Flags().StringVar(&task, "task", "", "the task's id (required)")
	cmd.Flags().StringVar(&attempt, "attempt", "", "this attempt's id (default: host-pid)")
	cmd.MarkFlagRequired("job")  //nolint:errcheck // the flag exists
	cmd.MarkFlagRequired("task") //nolint:errcheck // the flag exists
	return cmd
}

func newJobCommitCommand(g *globalOptions) *cobra.Command {
	var id, message string
	var opts job.CommitOptions
	cmd := &cobra.Command{
		Use:   "commit --job ID [--expect-tasks N] URL",
		Short: "Publish every task of a job with one commit",
		Long: `Commit reads the job's task records (one LIST, then GETs in parallel),
checks that --expect-tasks tasks are there, and publishes their files with
one compare-and-swap on the pointer: added to the current generation, below
--into PREFIX/ (which replaces that subtree, as 'put --into' does), or as the
whole tree with --replace. Two tasks that staged one path fail the commit.

Run again after a crash or an unknown outcome, commit finds the generation
that committed the job in the history and prints it; it never commits a job
twice.` + exitStatus(exitOK, exitError, exitUsage, exitUnknown, exitFenced, exitInterrupted),
		Example: `  publish job commit --job "$JOB" --expect-tasks 64 s3://bucket/out`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := job.ValidID("job", id); err != nil {
				return &usageError{err}
			}
			if opts.ExpectTasks < 0 {
				return usagef("--expect-tasks must not be negative")
			}
			d, err := g.openDataset(ctx, args[0])
			if err != nil {
				return err
			}
			opts.Message = message
			j, err := job.Open(ctx, d, id)
			if errors.Is(err, job.ErrNoJob) {
				// The records of a committed job are gone: its commit
				// record still says which generation committed it.
				state, gen, seq, serr := job.State(ctx, d.Store(), id)
				if serr == nil && state == "committed" {
					return printJobCommit(g, cmd.OutOrStdout(), id, gen, seq, true)
				}
			}
			if err != nil {
				return describe(args[0], err)
			}
			res, err := j.Commit(ctx, opts)
			if err != nil {
				return describe(args[0], err)
			}
			return printJobCommit(g, cmd.OutOrStdout(), id, res.Generation, res.Seq, res.Recovered)
		},
	}
	cmd.Flags().StringVar(&id, "job", "", "the job's id (required)")
	cmd.Flags().IntVar(&opts.ExpectTasks, "expect-tasks", 0, "fail unless exactly N tasks are committed")
	cmd.Flags().StringVar(&opts.Into, "into", "", "publish the files below PREFIX/, replacing that subtree")
	cmd.Flags().BoolVar(&opts.Replace, "replace", false, "publish the job's files as the whole tree")
	cmd.Flags().StringVarP(&message, "message", "m", "", "commit message")
	cmd.MarkFlagRequired("job") //nolint:errcheck // the flag exists
	cmd.MarkFlagsMutuallyExclusive("into", "replace")
	return cmd
}

type jobCommitInfo struct {
	Job        string `json:"job"`
	Generation string `json:"generation"`
	Seq        uint64 `json:"seq"`
	Recovered  bool   `json:"recovered"`
}

func printJobCommit(g *globalOptions, w io.Writer, id, gen string, seq uint64, recovered bool) error {
	if g.JSON {
		return writeJSON(w, jobCommitInfo{Job: id, Generation: gen, Seq: seq, Recovered: recovered})
	}
	how := "committed"
	if recovered {
		how = "was committed"
	}
	fmt.Fprintf(w, "job %s %s: seq %d generation %s\n", id, how, seq, gen)
	return nil
}

func newJobAbortCommand(g *globalOptions) *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "abort --job ID URL",
		Short: "Delete a job that was not committed",
		Long: `Abort marks the job aborted, so that no commit of it can start, and deletes
the files its tasks committed and its records. A job whose commit was started
is aborted only when the history proves that commit did not land; when a
pointer write of it may still land, abort exits 5 and deletes nothing (run
'job commit' to settle it).` + exitStatus(exitOK, exitError, exitUsage, exitUnknown, exitInterrupted),
		Example: `  publish job abort --job "$JOB" s3://bucket/out`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := job.ValidID("job", id); err != nil {
				return &usageError{err}
			}
			d, err := g.openDataset(ctx, args[0])
			if err != nil {
				return err
			}
			if err := job.Abort(ctx, d, id); err != nil {
				return describe(args[0], err)
			}
			fmt.Fprintf(g.out(cmd.OutOrStdout()), "job %s aborted\n", id)
			return nil
		},
	}
	cmd.Flags().StringVar(&id, "job", "", "the job's id (required)")
	cmd.MarkFlagRequired("job") //nolint:errcheck // the flag exists
	return cmd
}

type jobTaskInfo struct {
	Task       string `json:"task"`
	Attempt    string `json:"attempt"`
	Generation string `json:"generation"`
	Files      int    `json:"files"`
	Bytes      int64  `json:"bytes"`
}

type jobStatusInfo struct {
	Job        string        `json:"job"`
	State      string        `json:"state"`
	Generation string        `json:"generation,omitempty"`
	Seq        uint64        `json:"seq,omitempty"`
	Tasks      []jobTaskInfo `json:"tasks"`
}

func newJobStatusCommand(g *globalOptions) *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "status --job ID URL",
		Short: "List the tasks a job has committed",
		Long: `Status prints the job's state (open, committing, committed or aborted) and
the tasks committed so far, with the attempt that won each and its files and
bytes.` + exitStatus(exitOK, exitError, exitUsage, exitInterrupted),
		Example: `  publish job status --job "$JOB" s3://bucket/out
  publish --json job status --job "$JOB" s3://bucket/out`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if err := job.ValidID("job", id); err != nil {
				return &usageError{err}
			}
			d, err := g.openDataset(ctx, args[0])
			if err != nil {
				return err
			}
			info := jobStatusInfo{Job: id, Tasks: []jobTaskInfo{}}
			if info.State, info.Generation, info.Seq, err = job.State(ctx, d.Store(), id); err != nil {
				return describe(args[0], err)
			}
			j, err := job.Open(ctx, d, id)
			switch {
			case errors.Is(err, job.ErrNoJob) && info.State != "open":
			case err != nil:
				return describe(args[0], err)
			default:
				recs, err := j.Tasks(ctx)
				if err != nil {
					return describe(args[0], err)
				}
				for _, r := range recs {
					info.Tasks = append(info.Tasks, jobTaskInfo{Task: r.Task, Attempt: r.Attempt, Generation: r.Generation, Files: len(r.Entries), Bytes: r.Size()})
				}
			}
			w := cmd.OutOrStdout()
			if g.JSON {
				return writeJSON(w, info)
			}
			fmt.Fprintf(w, "job %s: %s", id, info.State)
			if info.Generation != "" {
				fmt.Fprintf(w, " (seq %d generation %s)", info.Seq, info.Generation)
			}
			fmt.Fprintf(w, ", %d tasks\n", len(info.Tasks))
			if len(info.Tasks) == 0 {
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TASK\tATTEMPT\tFILES\tBYTES")
			for _, t := range info.Tasks {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", t.Task, t.Attempt, t.Files, t.Bytes)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&id, "job", "", "the job's id (required)")
	cmd.MarkFlagRequired("job") //nolint:errcheck // the flag exists
	return cmd
}
