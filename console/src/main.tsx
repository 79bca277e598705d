// The console's entry: sign in with an API token, then the pages of the account.
import { render } from 'preact';
import { App } from './app.tsx';

render(<App />, document.getElementById('app')!);
