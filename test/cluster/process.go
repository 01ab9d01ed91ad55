package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is one of the cluster's commands, running in a process group of its own so that stopping
// it stops what it started too (containerd's shims start groups of their own and are swept apart).
type process struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has ended
	err  error         // how it ended, once done is closed
}

// stopGrace is how long a component may take to stop on SIGTERM before it is killed.
const stopGrace = 15 * time.Second

// start runs path with args, its output appended to logs/<name>.log of the cluster's directory, and
// records its pid so that a later run can stop it if this one is killed before it stops it.
func (c *Cluster) start(name, path string, args ...string) (*process, error) {
	log, err := os.OpenFile(filepath.Join(c.logDir(), name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = log.Close()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
	c.rec.Pids = append(c.rec.Pids, cmd.Process.Pid)
	return p, c.rec.save()
}

// exited returns an error when p has ended: a component that dies while the cluster waits for it is a
// failed start, with the end of its log to say why.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%w); the end of its log:\n%s", p.name, p.err, tail(p.log.Name(), 20))
	default:
		return nil
	}
}

// stop asks p's process group to end (SIGTERM), and kills it after stopGrace.
func (p *process) stop() {
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// What the group leader left behind in its group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	end := len(data)
	for i := len(data) - 1; i >= 0 && n >= 0; i-- {
		if data[i] == '\n' {
			n--
			if n < 0 {
				return string(data[i+1 : end])
			}
		}
	}
	return string(data[:end])
}
