package persister

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// This file is the one way the persister changes a share-partition's state: read (or take the cached
// object), compute, and write conditionally on the resourceVersion the computation read. A conflict
// means the world moved, perhaps by a fence: read again from the API server and compute again.

// maxConflicts bounds the conflicts one operation absorbs before it gives up with a retriable error.
const maxConflicts = 32

// computeFunc decides, from the object as it stands (nil: absent) whether and what to write. It
// records its answers in its closure; the answers of its last call are the ones that stand. It
// returns the object to write (a modified copy), or nil when there is nothing to write.
type computeFunc func(obj *sharestatev1.SharePartitionState) (*sharestatev1.SharePartitionState, error)

// updateResult says how an update loop ended.
type updateResult int

const (
	updateWritten     updateResult = iota // the last compute's write was applied
	updateNoWrite                         // the last compute, on a fresh read, needed no write
	updateUnknown                         // a write's answer was lost; whether it was applied cannot be told
	updateUnavailable                     // the API server could not be reached, or kept conflicting, in time
	updateFailed                          // the stored object is corrupt, or the API server refused the write
)

// updateLoop runs compute against the partition's object until compute's write is applied, or it
// needs no write on a fresh read. cached is the object to begin from, or nil to read it first. It
// returns the object as last seen (written or read), how the loop ended, and the error behind it.
func (p *Persister) updateLoop(ctx context.Context, c client.Client, key partitionKey, cached *sharestatev1.SharePartitionState, compute computeFunc) (*sharestatev1.SharePartitionState, updateResult, error) {
	obj, fresh, needRead := cached, false, cached == nil
	var bo backoff
	conflicts := 0
	for {
		if needRead {
			got, err := p.getObject(ctx, c, key)
			if err != nil {
				if classify(err) == classRetriable && bo.wait(ctx) {
					continue
				}
				return nil, updateUnavailable, err
			}
			if got != nil {
				got = p.stripManagedFields(ctx, c, got) // once an object's life; its answer is as fresh
			}
			obj, fresh, needRead = got, true, false
		}
		write, err := compute(obj)
		if err != nil || write == nil {
			if !fresh {
				// An answer that writes nothing, or reports corruption, must come from a fresh read:
				// the cache is trusted only under a conditional write.
				needRead = true
				continue
			}
			if err != nil {
				return obj, updateFailed, err
			}
			return obj, updateNoWrite, nil
		}
		write.Status.LastWriteID = newWriteID()
		sent := sentUpdate{uid: write.UID, resourceVersion: write.ResourceVersion, writeID: write.Status.LastWriteID}
		updated, err := p.updateStatus(ctx, c, write)
		switch classify(err) {
		case classOK:
			return updated, updateWritten, nil
		case classConflict, classNotFound:
			p.obs.Conflict()
			if conflicts++; conflicts > maxConflicts {
				return nil, updateUnavailable, fmt.Errorf("gave up after %d conflicting updates: %w", conflicts, err)
			}
			needRead = true
		case classRetriable:
			current, applied, err := p.afterLostAnswer(ctx, c, key, sent, &bo)
			switch {
			case err != nil:
				return nil, updateUnknown, err
			case applied:
				return current, updateWritten, nil
			default: // not applied: compute again on the object just read
				obj, fresh = current, true
			}
		default:
			return nil, updateFailed, fmt.Errorf("the API server refused the status update: %w", err)
		}
	}
}

// afterLostAnswer finds out what became of an update whose answer was lost (a timeout, a dropped
// connection) by reading the object again. Carrying the update's write id, the update was applied.
// Still at the resourceVersion the update was conditional on, it was not, and may be computed again.
// Otherwise it cannot be told whether it was applied and then overwritten, and err says so. Retrying
// blindly would be wrong: an update applied, then overtaken by a fence, then computed again, would
// answer FENCED for a write that in fact landed.
func (p *Persister) afterLostAnswer(ctx context.Context, c client.Client, key partitionKey, sent sentUpdate, bo *backoff) (current *sharestatev1.SharePartitionState, applied bool, err error) {
	for {
		if !bo.wait(ctx) {
			return nil, false, fmt.Errorf("the answer to a status update was lost: %w", ctx.Err())
		}
		current, err := p.getObject(ctx, c, key)
		if err != nil {
			if classify(err) == classRetriable {
				continue
			}
			return nil, false, err
		}
		switch {
		case current != nil && current.Status.LastWriteID == sent.writeID:
			return current, true, nil
		case current != nil && current.UID == sent.uid && current.ResourceVersion == sent.resourceVersion:
			return current, false, nil
		default:
			return nil, false, errors.New("the answer to a status update was lost and the object has changed since")
		}
	}
}

// sentUpdate is what identifies an update whose answer may be lost, kept apart from the object the
// client may overwrite.
type sentUpdate struct {
	uid             types.UID
	resourceVersion string
	writeID         string
}

// getObject reads the partition's object from the API server; nil when it does not exist.
func (p *Persister) getObject(ctx context.Context, c client.Reader, key partitionKey) (*sharestatev1.SharePartitionState, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.RequestTimeout)
	defer cancel()
	var obj sharestatev1.SharePartitionState
	err := c.Get(ctx, client.ObjectKey{Namespace: p.opts.Namespace, Name: key.objectName()}, &obj)
	p.apiRequest("get", err)
	switch classify(err) {
	case classOK:
		return &obj, nil
	case classNotFound:
		return nil, nil
	default:
		return nil, err
	}
}

// updateStatus writes the object's status, conditional on its resourceVersion.
func (p *Persister) updateStatus(ctx context.Context, c client.Client, obj *sharestatev1.SharePartitionState) (*sharestatev1.SharePartitionState, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.RequestTimeout)
	defer cancel()
	start := time.Now()
	err := c.Status().Update(ctx, obj)
	p.obs.StatusUpdated(time.Since(start))
	p.apiRequest("update_status", err)
	if err != nil {
		return nil, err
	}
	p.obs.StatusStored(estimateStatusBytes(obj))
	return obj, nil
}

// newWriteID returns a random token of 11 characters.
func newWriteID() string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], rand.Uint64())
	return base64.RawURLEncoding.EncodeToString(b[:])
}
