package windower

import (
	"os"
	"sync"
)

// remover removes spilled files a query no longer reads in the
// background, one directory at a time, off the path of the evaluation
// that made them: unlinking a bucket of tens of megabytes frees its pages
// in the page cache, kernel time the evaluation of the next bucket need
// not wait for. The query waits for it before it removes its own spill
// directory, the removed directories' parent.
type remover struct {
	mu      sync.Mutex
	pending []string
	running bool
	done    sync.WaitGroup
}

// remove queues dir for removal. A nil remover removes it now.
func (r *remover) remove(dir string) {
	if r == nil {
		os.RemoveAll(dir)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = append(r.pending, dir)
	if !r.running {
		r.running = true
		r.done.Add(1)
		go r.drain()
	}
}

// drain removes the queued directories until there are none.
func (r *remover) drain() {
	defer r.done.Done()
	for {
		r.mu.Lock()
		if len(r.pending) == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		dir := r.pending[0]
		r.pending = r.pending[1:]
		r.mu.Unlock()
		os.RemoveAll(dir)
	}
}

// wait waits until every queued directory is removed. No remove may
// start while it waits.
func (r *remover) wait() {
	if r != nil {
		r.done.Wait()
	}
}
